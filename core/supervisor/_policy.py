"""When a crashed process is restarted, and when the supervisor gives up on it.

Pure logic with an injected clock, so it is tested without processes or sleeps: the
pause before a restart doubles with each restart still inside the window, up to a
ceiling; one restart more than allowed within the window marks the process FAILED.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RestartPolicy:
    """The numbers behind the restarts, from the ``supervisor.*`` configuration keys."""

    max_restarts: int = 5
    window: float = 60.0
    backoff: float = 0.2
    max_backoff: float = 10.0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RestartPolicy:
        return cls(
            max_restarts=config["supervisor.max-restarts"],
            window=config["supervisor.restart-window"],
            backoff=config["supervisor.restart-backoff"],
            max_backoff=config["supervisor.max-backoff"],
        )

    def pause(self, recent_restarts: int) -> float:
        """The pause before the next restart, given the restarts already in the window."""
        return min(self.backoff * 2.0 ** min(recent_restarts, 64), self.max_backoff)


class RestartBudget:
    """The restarts of one process within the policy's window.

    Not thread-safe: the supervisor keeps one per process and touches it on its own
    thread only.
    """

    def __init__(self, policy: RestartPolicy,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._policy = policy
        self._clock = clock
        self._restarts: deque[float] = deque()

    @property
    def recent_restarts(self) -> int:
        """Restarts granted within the window that ends now."""
        self._forget_old(self._clock())
        return len(self._restarts)

    def next_restart(self) -> float | None:
        """Called when the process exited unasked: the pause before restarting it, or
        None when the budget is spent and the process should be left FAILED.

        A granted restart counts from now on, whether or not it succeeds.
        """
        now = self._clock()
        self._forget_old(now)
        if len(self._restarts) >= self._policy.max_restarts:
            return None
        pause = self._policy.pause(len(self._restarts))
        self._restarts.append(now)
        return pause

    def reset(self) -> None:
        """Forget every restart: the process was started again on request."""
        self._restarts.clear()

    def _forget_old(self, now: float) -> None:
        while self._restarts and self._restarts[0] <= now - self._policy.window:
            self._restarts.popleft()
