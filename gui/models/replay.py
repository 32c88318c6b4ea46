"""A job as it was at an earlier moment: the replay behind the time slider.

Two sources tell a job's past. The recorded events (``ExecutionStateEvent``,
``JobStatusEvent``, kept per job by the bridge's recorder) say every change as it
happened, including a job status that came back (RUNNING, RESTARTING, RUNNING). The latest
snapshot says the job's shape and, for every attempt, when it entered each state (its
``state_timestamps``), so a job that ran before the window attached can be replayed too.
``JobHistory`` merges both into one list of transitions per attempt; ``at(t)`` renders a
``JobGraphSnapshot``, as ``ExecutionGraph.snapshot()`` does, for the moment ``t``, which
the graph and slot views draw like a live one.

Pure code on snapshots and event objects (no Qt); runs on the GUI thread, a few
milliseconds for a thousand subtasks.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.ids import attempt_id_of
from clusterdeck.core.protocol.snapshots import (
    AttemptSnapshot,
    JobGraphSnapshot,
    JobProgress,
    SlotSnapshot,
    SubtaskSnapshot,
    VertexSnapshot,
)
from clusterdeck.core.protocol.states import ExecutionState, JobStatus


@dataclass
class _Attempt:
    attempt_id: str
    attempt: int
    times: list[float] = field(default_factory=list)
    states: list[ExecutionState] = field(default_factory=list)
    slot: SlotSnapshot | None = None
    failure: FailureRecord | None = None
    input_splits: tuple[int, ...] = ()
    epoch: int = 0

    def add(self, at: float, state: ExecutionState) -> None:
        if state in self.states:
            return
        index = bisect.bisect_right(self.times, at)
        self.times.insert(index, at)
        self.states.insert(index, state)

    def state_at(self, t: float) -> ExecutionState | None:
        index = bisect.bisect_right(self.times, t)
        return self.states[index - 1] if index else None

    def time_of(self, state: ExecutionState) -> float | None:
        return self.times[self.states.index(state)] if state in self.states else None


_LIFE = list(JobStatus)


class JobHistory:
    """Every transition of one job, from its latest snapshot and its recorded events."""

    def __init__(self, snapshot: JobGraphSnapshot, events: Iterable[Any] = ()) -> None:
        self.snapshot = snapshot
        self.job_id = snapshot.job_id
        self._attempts: dict[tuple[str, int], dict[int, _Attempt]] = {}
        statuses = {(at, status) for status, at in snapshot.status_timestamps.items()}
        for vertex in snapshot.vertices:
            for subtask in vertex.subtasks:
                kept = self._attempts.setdefault((vertex.id, subtask.subtask), {})
                for data in subtask.attempts:
                    attempt = _Attempt(data.attempt_id, data.attempt, slot=data.slot,
                                       failure=data.failure, input_splits=data.input_splits,
                                       epoch=data.epoch)
                    for state, at in data.state_timestamps.items():
                        attempt.add(at, state)
                    kept[attempt.attempt] = attempt
        for event in events:
            if getattr(event, "job_id", self.job_id) != self.job_id:
                continue
            if hasattr(event, "attempt_id"):
                self._add_event(event)
            elif hasattr(event, "new"):
                statuses.add((float(event.at), JobStatus(event.new)))
        # Two statuses of one moment (FAILING and FAILED in one turn of the JobMaster):
        # the terminal one is where the job stayed, then the later one in its life.
        self._statuses = sorted(statuses, key=lambda s: (s[0], s[1].is_terminal,
                                                         _LIFE.index(s[1])))
        self._status_times = [at for at, _ in self._statuses]

    def _add_event(self, event: Any) -> None:
        kept = self._attempts.get((str(event.vertex_id), int(event.subtask)))
        if kept is None:
            return  # not a subtask of this job's shape
        attempt = kept.get(int(event.attempt))
        if attempt is None:
            attempt = kept[int(event.attempt)] = _Attempt(str(event.attempt_id),
                                                          int(event.attempt))
        attempt.add(float(event.at), ExecutionState(event.new))
        if attempt.slot is None and event.taskmanager_id is not None \
                and event.slot_index is not None:
            attempt.slot = SlotSnapshot(str(event.taskmanager_id), int(event.slot_index))
        if attempt.failure is None and event.failure is not None:
            attempt.failure = event.failure

    # -- the span -----------------------------------------------------------------------------

    @property
    def start(self) -> float:
        """The first moment known (the job's creation, as a rule)."""
        times = [t for t, _ in self._statuses[:1]]
        times += [a.times[0] for attempts in self._attempts.values()
                  for a in attempts.values() if a.times]
        return min(times) if times else time.time()

    @property
    def end(self) -> float:
        """The job's end when it ended, else now."""
        if self.status_at(float("inf")).is_terminal:
            times = [t for t, _ in self._statuses[-1:]]
            times += [a.times[-1] for attempts in self._attempts.values()
                      for a in attempts.values() if a.times]
            return max(max(times), self.start)
        return max(time.time(), self.start)

    def status_at(self, t: float) -> JobStatus:
        index = bisect.bisect_right(self._status_times, t)
        return self._statuses[index - 1][1] if index else JobStatus.CREATED

    # -- the snapshot of a moment -------------------------------------------------------------

    def at(self, t: float) -> JobGraphSnapshot:
        """The snapshot as it was at ``t`` (wall clock seconds)."""
        finished = total = 0
        vertices: list[VertexSnapshot] = []
        for vertex in self.snapshot.vertices:
            subtasks = []
            counts: dict[ExecutionState, int] = {}
            for subtask in vertex.subtasks:
                attempts = self._attempts_at(vertex.id, subtask.subtask, t)
                state = attempts[-1].state
                counts[state] = counts.get(state, 0) + 1
                finished += state is ExecutionState.FINISHED
                total += 1
                subtasks.append(SubtaskSnapshot(subtask.id, subtask.subtask, state,
                                                attempts[-1].attempt_id, attempts))
            vertices.append(replace(vertex, state_counts=counts, subtasks=tuple(subtasks)))
        root = self.snapshot.root_cause
        return replace(
            self.snapshot, status=self.status_at(t),
            status_timestamps={status: at for at, status in self._statuses if at <= t},
            progress=JobProgress(finished, total), vertices=tuple(vertices),
            failures=tuple(f for f in self.snapshot.failures if f.timestamp <= t),
            root_cause=root if root is not None and root.timestamp <= t else None)

    def _attempts_at(self, vertex_id: str, subtask: int, t: float
                     ) -> tuple[AttemptSnapshot, ...]:
        shown = []
        for number in sorted(self._attempts.get((vertex_id, subtask), {})):
            attempt = self._attempts[(vertex_id, subtask)][number]
            state = attempt.state_at(t)
            if state is None:
                continue
            deployed = attempt.time_of(ExecutionState.DEPLOYING)
            held = deployed is not None and deployed <= t
            ended = next((at for at, s in zip(attempt.times, attempt.states, strict=True)
                          if s.is_terminal and at <= t), None)
            shown.append(AttemptSnapshot(
                attempt_id=attempt.attempt_id, attempt=attempt.attempt, state=state,
                slot=attempt.slot if held else None,
                state_timestamps={s: at for at, s in zip(attempt.times, attempt.states,
                                                         strict=True) if at <= t},
                start_time=deployed if held else None, end_time=ended,
                failure=attempt.failure if state is ExecutionState.FAILED else None,
                input_splits=attempt.input_splits, epoch=attempt.epoch))
        if not shown:
            shown.append(AttemptSnapshot(attempt_id_of(self.job_id, vertex_id, subtask, 0), 0,
                                         ExecutionState.CREATED))
        return tuple(shown)
