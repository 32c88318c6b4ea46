"""What an endpoint's collaborators may use of it: its main thread, reached by timers,
posted calls and callbacks, and its worker threads.

The JobMaster's and the TaskExecutor's collaborators (slots, deployments, reconciliation,
registration, state updates, the Spark host, ...) keep their state on their endpoint's main
thread and take this narrow protocol, not the endpoint, so a unit test drives them with a
fake and no transport. ``RpcEndpoint`` satisfies it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from clusterdeck.core.rpc._timers import ScheduledCall

T = TypeVar("T")


class MainThread(Protocol):
    """Timers, worker threads and callbacks back onto the endpoint's main thread."""

    def schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> ScheduledCall: ...

    def run_async(self, fn: Callable[..., Any], *args: Any) -> None: ...

    def run_in_worker(self, fn: Callable[..., T], *args: Any, name: str = ...) -> Future[T]: ...

    def on_main_thread(self, future: Future[T],
                       callback: Callable[[T | None, BaseException | None], None]) -> None: ...
