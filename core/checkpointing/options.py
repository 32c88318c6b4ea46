"""How a streaming job checkpoints: Flink's ``execution.checkpointing.*`` options.

Plain data with Flink's defaults, checked once when the job is submitted; the
coordinator reads it and nothing else does.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CheckpointingMode(StrEnum):
    """Exactly-once aligns the barriers of a task's inputs (a record after a barrier waits
    until the barrier came on every input); at-least-once lets records pass, so after a
    restore some are processed twice, none lost."""

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"


@dataclass(frozen=True)
class CheckpointOptions:
    """``interval``: seconds from one trigger to the next (0 turns checkpointing off);
    ``timeout``: a checkpoint not complete after this many seconds is aborted;
    ``tolerable_failures``: consecutive failed checkpoints the job survives (one more
    fails it); ``min_pause``: seconds from a checkpoint's end to the next trigger;
    ``retained``: completed checkpoints kept (the older ones' state is deleted)."""

    interval: float = 0.0
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    timeout: float = 600.0
    tolerable_failures: int = 0
    min_pause: float = 0.0
    retained: int = 1

    def __post_init__(self) -> None:
        for name in ("interval", "timeout", "min_pause"):
            if getattr(self, name) < 0:
                raise ValueError(f"checkpointing {name} must not be negative")
        if self.interval and self.timeout <= 0:
            raise ValueError("checkpointing timeout must be positive")
        if self.tolerable_failures < 0:
            raise ValueError("tolerable failed checkpoints must not be negative")
        if self.retained < 1:
            raise ValueError("at least one completed checkpoint must be retained")

    @property
    def enabled(self) -> bool:
        return self.interval > 0
