"""The actor runtime: endpoints with one main thread, gateways, and their transports."""

from core.rpc._codec import (
    Envelope,
    decode,
    encode,
    from_data,
    message,
    message_types,
    to_data,
)
from core.rpc._endpoint import FencedRpcEndpoint, Invocation, RpcEndpoint, handler
from core.rpc._errors import (
    AskTimeoutError,
    CodecError,
    EndpointNotFoundError,
    EndpointStoppedError,
    FencingTokenMismatchError,
    FrameTooLargeError,
    NotMainThreadError,
    RemoteError,
    RpcError,
)
from core.rpc._gateway import Gateway
from core.rpc._local import LocalBus, LocalRpcService
from core.rpc._scheduler import ScheduledCall, Scheduler
from core.rpc._service import RpcService

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
    "NotMainThreadError",
    "RemoteError",
    "RpcEndpoint",
    "RpcError",
    "RpcService",
    "ScheduledCall",
    "Scheduler",
    "decode",
    "encode",
    "from_data",
    "handler",
    "message",
    "message_types",
    "to_data",
]
