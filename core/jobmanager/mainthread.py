"""What of its JobMaster a collaborator may use: the endpoint's main thread, reached by
timers, callbacks and posted calls, and its worker threads. The collaborators (the job's
checkpoints, slots, deployments, reconciliation, snapshots) hold their state on that main
thread and take this narrow protocol, not the JobMaster.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from clusterdeck.core.rpc import ScheduledCall


class Endpoint(Protocol):
    """Timers, worker threads and callbacks back onto the main thread."""

    def schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> ScheduledCall: ...

    def run_async(self, fn: Callable[..., Any], *args: Any) -> None: ...

    def run_in_worker(self, fn: Callable[..., Any], *args: Any, name: str = ...) -> Any: ...

    def on_main_thread(self, future: Future[Any],
                       callback: Callable[[Any, Any], None]) -> None: ...
