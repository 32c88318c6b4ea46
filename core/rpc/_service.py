"""RpcService: starts endpoints, hands out gateways, moves envelopes.

Subclasses supply the transport (MQTT, or in-process for unit tests). Every message,
whichever the transport, goes through the codec, so a unit test on LocalRpcService
catches a message that could not cross the wire.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from clusterdeck.core.rpc._codec import Envelope, decode, encode, routing_of
from clusterdeck.core.rpc._endpoint import Invocation, RpcEndpoint
from clusterdeck.core.rpc._errors import (
    AskTimeoutError,
    CodecError,
    RemoteError,
    ServiceClosedError,
)
from clusterdeck.core.rpc._gateway import Gateway
from clusterdeck.core.rpc._timers import TimerQueue
from clusterdeck.core.rpc._topics import sent_by

log = logging.getLogger(__name__)
G = TypeVar("G", bound=Gateway)
EventCallback = Callable[[str, Any], None]
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:@-]+$")


def check_endpoint_id(endpoint_id: str) -> str:
    if not _SAFE_ID.match(endpoint_id):
        raise ValueError(f"endpoint id {endpoint_id!r} must be letters, digits and _.:@- only")
    return endpoint_id


class RpcService(ABC):
    """The transport-independent half of a service.

    Thread model: ``send_*`` and ``publish`` may be called from any thread; received
    envelopes are decoded on the transport's thread and only enqueued into mailboxes.
    """

    def __init__(self, service_id: str | None = None, *, ask_timeout: float = 10.0,
                 framesize: int = 256 * 1024) -> None:
        self.service_id = check_endpoint_id(service_id or f"svc-{uuid.uuid4().hex[:12]}")
        self.ask_timeout = ask_timeout
        self.framesize = framesize
        self.scheduler = TimerQueue(f"scheduler-{self.service_id}")
        self._endpoints: dict[str, RpcEndpoint] = {}
        self._pending: dict[str, tuple[Future[Any], Any, str]] = {}
        self._lock = threading.Lock()
        self.refused = 0  # messages whose sender was not who they said: see _receive
        self._closed = False

    # -- endpoints and gateways -----------------------------------------------------------

    def start_endpoint(self, endpoint: RpcEndpoint) -> RpcEndpoint:
        check_endpoint_id(endpoint.endpoint_id)
        with self._lock:
            if endpoint.endpoint_id in self._endpoints:
                raise ValueError(f"endpoint {endpoint.endpoint_id} is already started")
            self._endpoints[endpoint.endpoint_id] = endpoint
        self._endpoint_added(endpoint.endpoint_id)
        endpoint._start(self)
        return endpoint

    def stop_endpoint(self, endpoint: RpcEndpoint, timeout: float = 10.0) -> None:
        with self._lock:
            self._endpoints.pop(endpoint.endpoint_id, None)
        self._endpoint_removed(endpoint.endpoint_id)
        endpoint.stop().result(timeout)

    def gateway(self, gateway_type: type[G], target: str,
                fencing_token: str | None = None) -> G:
        return gateway_type(self, target, fencing_token)

    def endpoint(self, endpoint_id: str) -> RpcEndpoint | None:
        with self._lock:
            return self._endpoints.get(endpoint_id)

    # -- sending ----------------------------------------------------------------------------

    def send_tell(self, target: str, message: Any, fencing_token: str | None = None,
                  heartbeat: bool = False) -> None:
        envelope = Envelope("tell", self.service_id, message, fencing_token=fencing_token)
        self._transmit(target, encode(envelope, self.framesize), heartbeat=heartbeat)

    def send_ask(self, target: str, message: Any, fencing_token: str | None = None,
                 timeout: float | None = None) -> Future[Any]:
        # Unguessable, so that nobody who may write to our reply topic can answer an ask
        # it never saw.
        correlation_id = f"{self.service_id}:{secrets.token_hex(8)}"
        envelope = Envelope("ask", self.service_id, message, correlation_id=correlation_id,
                            reply_to=self.service_id, fencing_token=fencing_token)
        data = encode(envelope, self.framesize)
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                future.set_exception(ServiceClosedError(
                    f"{type(message).__name__} to {target} was not sent: {self.service_id} "
                    "is closed"))
                return future
            self._pending[correlation_id] = (future, message, target)
        limit = self.ask_timeout if timeout is None else timeout
        self.scheduler.schedule(limit, lambda: self._time_out(correlation_id, target, limit))
        self._transmit(target, data, heartbeat=False)
        return future

    def _time_out(self, correlation_id: str, target: str, limit: float) -> None:
        with self._lock:
            entry = self._pending.pop(correlation_id, None)
        if entry is not None and not entry[0].done():
            entry[0].set_exception(AskTimeoutError(
                f"{type(entry[1]).__name__} to {target} got no answer within {limit:g} s "
                f"(rpc.ask-timeout)"))

    # -- receiving --------------------------------------------------------------------------

    def _receive(self, target: str | None, data: bytes, sender: str | None = None) -> None:
        """Decode one payload and route it; called on the transport's thread.

        ``sender`` is the identity the transport vouches for (from the topic, which the
        broker binds to the login); None where it vouches for nobody (in-process)."""
        try:
            envelope = decode(data, self.framesize)
        except CodecError as error:
            log.warning("%s: dropped a message for %s: %s", self.service_id, target, error)
            self._answer_malformed(target, data, error, sender)
            return
        if sender is not None and not sent_by(sender, envelope.sender):
            self._refuse(envelope, sender)
        elif envelope.kind == "reply":
            self._complete(envelope, sender)
        elif envelope.kind in ("tell", "ask") and target is not None:
            self._dispatch(target, envelope, verified=sender is not None)

    def _answer_malformed(self, target: str | None, data: bytes, error: CodecError,
                          sender: str | None) -> None:
        """An ask that could not be decoded but whose routing can be read is answered with
        why, so its asker does not wait for its timeout; only at the sender's own reply
        address (as ``_refuse``), never at one it named for somebody else."""
        request = routing_of(data, self.framesize)
        if request is None or request.kind != "ask" or target is None \
                or not request.correlation_id or not request.reply_to:
            return
        if sender is not None and not (sent_by(sender, request.sender)
                                       and sent_by(sender, request.reply_to)):
            return
        self._replier(request)(None, RemoteError(
            "MalformedMessageError", f"{target} could not read the request: {error}"))

    def _refuse(self, envelope: Envelope, sender: str) -> None:
        """A message whose ``from`` is not its sender: never delivered. The asker hears
        why when its reply address is its own; a forged one gets nothing."""
        self.refused += 1
        log.warning("%s: refused a %s %s from %r that says it is from %r", self.service_id,
                    envelope.kind, envelope.type_name or "", sender, envelope.sender)
        if envelope.kind == "ask" and sent_by(sender, envelope.reply_to):
            self._replier(envelope)(None, RemoteError(
                "SenderMismatchError", f"a message sent by {sender!r} said it was from "
                f"{envelope.sender!r}; refused"))

    def _dispatch(self, target: str, envelope: Envelope, *, verified: bool = False) -> None:
        endpoint = self.endpoint(target)
        reply = self._replier(envelope) if envelope.kind == "ask" else None
        if endpoint is None:
            if reply:
                reply(None, RemoteError("EndpointNotFoundError", f"no endpoint {target}"))
            return
        endpoint._deliver(Invocation(envelope.message, envelope.sender,
                                     envelope.fencing_token, reply, verified))

    def _replier(self, request: Envelope) -> Callable[[Any, BaseException | None], None]:
        def reply(result: Any, error: BaseException | None) -> None:
            error_data = None
            if error is not None:
                remote = error if isinstance(error, RemoteError) else RemoteError(
                    type(error).__name__, str(error))
                error_data = {"type": remote.type_name, "message": remote.remote_message,
                              "traceback": remote.remote_traceback[-8000:]}
                result = None
            envelope = Envelope("reply", self.service_id, result,
                                correlation_id=request.correlation_id, error=error_data)
            try:
                data = encode(envelope, self.framesize)
            except CodecError as encode_error:
                data = encode(Envelope("reply", self.service_id, None,
                                       correlation_id=request.correlation_id,
                                       error={"type": type(encode_error).__name__,
                                              "message": str(encode_error)}), self.framesize)
            self._transmit_reply(request.reply_to, data)
        return reply

    def host_of(self, endpoint_id: str) -> str | None:
        """The identity that may answer asks to ``endpoint_id``; None: anyone (in-process)."""
        return None

    def _complete(self, envelope: Envelope, sender: str | None = None) -> None:
        with self._lock:
            entry = self._pending.get(envelope.correlation_id)
            host = self.host_of(entry[2]) if entry is not None else None
            if entry is not None and sender is not None and host is not None \
                    and sender != host:
                entry = None  # an answer from someone who was not asked: not the answer
                log.warning("%s: refused an answer from %r", self.service_id, sender)
                self.refused += 1
            elif entry is not None:
                del self._pending[envelope.correlation_id]
        if entry is None:
            return  # a late or duplicated answer: the ask already completed or timed out
        future = entry[0]
        if envelope.error is not None:
            error = envelope.error
            future.set_exception(RemoteError(error.get("type", "Error"),
                                             error.get("message", ""),
                                             error.get("traceback", "")))
        else:
            future.set_result(envelope.message)

    # -- observers ------------------------------------------------------------------------

    def encode_event(self, message: Any) -> bytes:
        return encode(Envelope("event", self.service_id, message), self.framesize)

    def decode_event(self, data: bytes) -> Any:
        return decode(data, self.framesize).message

    @abstractmethod
    def publish(self, topic: str, message: Any, *, retained: bool = False, qos: int = 1) -> None:
        """Publish an event or retained state under the cluster's topic root."""

    @abstractmethod
    def subscribe(self, topic_filter: str, callback: EventCallback, *,
                  decoded: bool = True) -> None:
        """Call ``callback(topic, message)`` on the transport thread for every event.
        ``decoded=False``: ``callback(topic, payload)`` with the payload as it travelled
        (never empty), for a receiver that decodes off the transport thread with
        ``decode_event`` (a large snapshot would hold up every message behind it)."""

    @abstractmethod
    def unsubscribe(self, topic_filter: str, callback: EventCallback) -> None:
        """Stop calling ``callback`` for ``topic_filter``."""

    def forget_retained(self, topic: str) -> None:
        """Stop publishing ``topic`` again after a reconnect; the broker keeps it."""

    @abstractmethod
    def clear_retained(self, topic: str) -> None:
        """Delete the retained state of ``topic``, here and on the broker."""

    # -- transport ------------------------------------------------------------------------

    @abstractmethod
    def _transmit(self, target: str, data: bytes, *, heartbeat: bool) -> None: ...

    @abstractmethod
    def _transmit_reply(self, reply_to: str, data: bytes) -> None: ...

    def _endpoint_added(self, endpoint_id: str) -> None:
        """Hook for transports that subscribe per endpoint."""

    def _endpoint_removed(self, endpoint_id: str) -> None:
        """Hook for transports that subscribe per endpoint."""

    def close(self) -> None:
        """Stop every endpoint, then the transport. Asks still in flight fail now: the
        timer that would time them out stops with the service."""
        with self._lock:
            endpoints = list(self._endpoints.values())
        for endpoint in endpoints:
            self.stop_endpoint(endpoint)
        self.scheduler.stop()
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, {}
        for future, message, target in pending.values():
            if not future.done():
                future.set_exception(ServiceClosedError(
                    f"{type(message).__name__} to {target} got no answer before "
                    f"{self.service_id} closed"))
