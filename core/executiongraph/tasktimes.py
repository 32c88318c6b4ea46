"""How long a vertex's tasks typically take: a moving average of its finished attempts'
RUNNING to FINISHED. The scheduler deploys ahead only behind short tasks, and behind the
shortest as many as cover a round trip to the JobMaster."""

from __future__ import annotations

import math

from clusterdeck.core.executiongraph.execution import Execution
from clusterdeck.core.protocol.states import ExecutionState


class TaskTimes:
    WEIGHT = 0.2  # of the newest finished attempt
    # A TaskManager's report and the JobMaster's next deployment take some milliseconds
    # (the report lingers up to 5 ms, then two messages and a turn of each mailbox), tens
    # of them when the JobMaster is busy: a slot's queue holds the tasks of ROUND_TRIP
    # seconds, at most MOST_AHEAD of them. With 8 and 50 ms, slots of a 2,000-subtask job
    # of no-op tasks stood idle most of the time waiting for their next deployments
    # (2,030-2,380 subtasks/s against 2,650-3,350 with 32 and 100 ms).
    ROUND_TRIP = 0.1
    MOST_AHEAD = 32

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

    def ahead(self, vertex_id: str) -> int:
        """How many attempts to queue behind a task of the vertex (at least one)."""
        typical = self._seconds.get(vertex_id)
        if typical is None:
            return 1
        if typical <= 0:
            return self.MOST_AHEAD
        return max(1, min(self.MOST_AHEAD, math.ceil(self.ROUND_TRIP / typical)))
