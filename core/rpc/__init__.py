"""The actor runtime: endpoints with one main thread, gateways, and their transports."""

from clusterdeck.core.rpc._codec import (
    Envelope,
    decode,
    encode,
    encoded_size,
    from_data,
    message,
    message_types,
    to_data,
)
from clusterdeck.core.rpc._endpoint import FencedRpcEndpoint, Invocation, RpcEndpoint, handler
from clusterdeck.core.rpc._errors import (
    AskTimeoutError,
    CodecError,
    EndpointNotFoundError,
    EndpointStoppedError,
    FencingTokenMismatchError,
    FrameTooLargeError,
    NotMainThreadError,
    RefusedMessageError,
    RemoteError,
    RpcError,
    SenderMismatchError,
    ServiceClosedError,
)
from clusterdeck.core.rpc._gateway import Gateway
from clusterdeck.core.rpc._local import LocalBus, LocalRpcService
from clusterdeck.core.rpc._mainthread import MainThread
from clusterdeck.core.rpc._service import RpcService
from clusterdeck.core.rpc._timers import ScheduledCall, TimerQueue
from clusterdeck.core.rpc._topics import TopicLayout, sent_by, topic_matches

__all__ = [
    "AskTimeoutError",
    "CodecError",
    "EndpointNotFoundError",
    "EndpointStoppedError",
    "Envelope",
    "FencedRpcEndpoint",
    "FencingTokenMismatchError",
    "FrameTooLargeError",
    "Gateway",
    "Invocation",
    "LocalBus",
    "LocalRpcService",
    "MainThread",
    "NotMainThreadError",
    "RefusedMessageError",
    "RemoteError",
    "RpcEndpoint",
    "RpcError",
    "RpcService",
    "ScheduledCall",
    "SenderMismatchError",
    "ServiceClosedError",
    "TimerQueue",
    "TopicLayout",
    "decode",
    "encode",
    "encoded_size",
    "from_data",
    "handler",
    "message",
    "message_types",
    "sent_by",
    "to_data",
    "topic_matches",
]
