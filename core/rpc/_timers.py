"""One timer thread per service: delayed calls without a thread per timer."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class ScheduledCall:
    """A handle to a delayed call; ``cancel()`` keeps it from running."""

    __slots__ = ("cancelled", "due", "fn")

    def __init__(self, due: float, fn: Callable[[], None]) -> None:
        self.due = due
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class TimerQueue:
    """Runs short callables after a delay on its own thread.

    The callables it is given must not block: endpoints only use it to post work into
    their mailbox, and services to fail asks that timed out.
    """

    def __init__(self, name: str = "rpc-scheduler") -> None:
        self._heap: list[tuple[float, int, ScheduledCall]] = []
        self._counter = itertools.count()
        self._wakeup = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, delay: float, fn: Callable[[], None]) -> ScheduledCall:
        call = ScheduledCall(time.monotonic() + max(0.0, delay), fn)
        with self._wakeup:
            # The thread sleeps until the earliest call: it needs waking only for a call
            # due before that (an ask's timeout, scheduled for every ask, seldom is).
            sooner = not self._heap or call.due < self._heap[0][0]
            heapq.heappush(self._heap, (call.due, next(self._counter), call))
            if sooner:
                self._wakeup.notify()
        return call

    def stop(self) -> None:
        with self._wakeup:
            self._stopped = True
            self._wakeup.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._wakeup:
                while not self._stopped and (not self._heap
                                             or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._wakeup.wait(timeout)
                if self._stopped:
                    return
                _, _, call = heapq.heappop(self._heap)
            if not call.cancelled:
                try:
                    call.fn()
                except Exception:
                    log.exception("scheduled call failed")
