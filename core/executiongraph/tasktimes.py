"""How long a vertex's tasks typically take: a moving average of its finished attempts'
RUNNING to FINISHED. The scheduler deploys ahead only behind short tasks."""

from __future__ import annotations

from clusterdeck.core.executiongraph.execution import Execution
from clusterdeck.core.protocol.states import ExecutionState


class TaskTimes:
    WEIGHT = 0.2  # of the newest finished attempt

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}  # per vertex

    def finished(self, execution: Execution, now: float) -> None:
        started = execution.state_timestamps.get(ExecutionState.RUNNING)
        if started is None:
            return
        seconds = max(0.0, now - started)
        typical = self._seconds.get(execution.vertex_id, seconds)
        self._seconds[execution.vertex_id] = (1 - self.WEIGHT) * typical + self.WEIGHT * seconds

    def shorter_than(self, vertex_id: str, limit: float) -> bool:
        """False until a task of the vertex has finished."""
        typical = self._seconds.get(vertex_id)
        return typical is not None and typical < limit
