"""What the TaskExecutor's collaborators use of it: its main thread and its transport.

The registration, the state updates, the Spark host, the slot queue and the ticks each
keep their state on the TaskExecutor's main thread; this narrow protocol is all they see
of the endpoint, so a unit test drives them with a fake and no MQTT.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from clusterdeck.core.rpc import RpcService, ScheduledCall

T = TypeVar("T")


class Endpoint(Protocol):
    """The TaskExecutor, as its collaborators see it (``RpcEndpoint``'s own methods)."""

    endpoint_id: str

    @property
    def rpc_service(self) -> RpcService: ...

    def run_async(self, fn: Callable[..., Any], *args: Any) -> None: ...

    def schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> ScheduledCall: ...

    def on_main_thread(self, future: Future[T],
                       callback: Callable[[T | None, BaseException | None], None]) -> None: ...

    def run_in_worker(self, fn: Callable[..., T], *args: Any, name: str = ...) -> Future[T]: ...
