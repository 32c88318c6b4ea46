"""Gateways: what a caller holds instead of a reference to an endpoint.

A typed gateway subclass names the calls an endpoint accepts; each call becomes a message
handed to the service: ``tell`` is fire-and-forget, ``ask`` returns a Future that fails
with AskTimeoutError after ``rpc.ask-timeout``.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from clusterdeck.core.rpc._service import RpcService


class Gateway:
    def __init__(self, service: RpcService, target: str,
                 fencing_token: str | None = None) -> None:
        self._service = service
        self.target = target
        self.fencing_token = fencing_token

    def with_fencing_token(self, token: str | None) -> Self:
        return type(self)(self._service, self.target, token)

    def tell(self, message: Any) -> None:
        self._service.send_tell(self.target, message, self.fencing_token)

    def tell_heartbeat(self, message: Any) -> None:
        """A tell on the target's heartbeat channel (QoS 0: a lost one is replaced soon)."""
        self._service.send_tell(self.target, message, self.fencing_token, heartbeat=True)

    def ask(self, message: Any, timeout: float | None = None) -> Future[Any]:
        return self._service.send_ask(self.target, message, self.fencing_token, timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target!r})"
