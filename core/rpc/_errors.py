"""The errors of the actor runtime. Every one of them says what to do about it."""

from __future__ import annotations


class RpcError(Exception):
    """Base of every error the runtime raises or puts into a future."""


class AskTimeoutError(RpcError, TimeoutError):
    """An ask got no answer within ``rpc.ask-timeout``."""


class FencingTokenMismatchError(RpcError):
    """A message carried a stale fencing token: it was meant for an earlier leader."""


class RefusedMessageError(RpcError):
    """A well-formed message its receiver will not act on: from a sender that may not send
    it, or about an attempt or job the receiver does not have. The asker of an ask gets it
    as the answer; a tell's is logged and dropped, and the receiver goes on as before: a
    hostile or late sender cannot fail what its message names."""


class SenderMismatchError(RefusedMessageError, PermissionError):
    """A message came from someone its handler does not take it from: a TaskManager that
    speaks for another, or a role that may not make this call (broker/acl.py)."""


class EndpointStoppedError(RpcError):
    """The endpoint stopped before it handled the message."""


class ServiceClosedError(RpcError):
    """The service was closed: an ask still in flight will get no answer, and no ask can
    be sent any more."""


class EndpointNotFoundError(RpcError):
    """No endpoint with that id is started on this service."""


class NotMainThreadError(RpcError, AssertionError):
    """Endpoint state was touched from a thread other than the endpoint's main thread."""


class CodecError(RpcError, ValueError):
    """A message could not be encoded or a payload could not be decoded and validated."""


class FrameTooLargeError(CodecError):
    """A message is larger than ``rpc.framesize``; bulk data must travel as files."""


class RemoteError(RpcError):
    """The endpoint that handled an ask raised; this carries its exception as data."""

    def __init__(self, type_name: str, message: str, remote_traceback: str = "") -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.remote_message = message
        self.remote_traceback = remote_traceback
