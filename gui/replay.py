"""A job as it was at an earlier moment: the replay behind the time slider.

Two sources tell a job's past. The recorded events (``ExecutionStateEvent``,
``JobStatusEvent``, kept per job by the bridge's recorder) say every change as it
happened, including a job status that came back (RUNNING, RESTARTING, RUNNING). The latest
snapshot says the job's shape and, for every attempt, when it entered each state (its
``state_timestamps``), so a job that ran before the window attached can be replayed too.
``JobHistory`` merges both into one list of transitions per attempt; ``at(t)`` renders a
snapshot dict of the same shape as ``ExecutionGraph.snapshot()`` for the moment ``t``,
which the graph and slot views draw like a live one.

Pure code on dicts and event objects (no Qt); runs on the GUI thread, a few milliseconds
for a thousand subtasks.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

HOLDING = frozenset({"DEPLOYING", "RUNNING", "CANCELING"})
"""States in which an attempt holds its slot."""
TERMINAL_EXECUTION = frozenset({"FINISHED", "CANCELED", "FAILED"})
TERMINAL_JOB = frozenset({"FINISHED", "FAILED", "CANCELED"})


@dataclass
class _Attempt:
    attempt_id: str
    attempt: int
    times: list[float] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    slot: dict[str, Any] | None = None
    failure: dict[str, Any] | None = None
    input_splits: list[Any] = field(default_factory=list)
    epoch: int = 0

    def add(self, at: float, state: str) -> None:
        if state in self.states:
            return
        index = bisect.bisect_right(self.times, at)
        self.times.insert(index, at)
        self.states.insert(index, state)

    def state_at(self, t: float) -> str | None:
        index = bisect.bisect_right(self.times, t)
        return self.states[index - 1] if index else None

    def time_of(self, state: str) -> float | None:
        return self.times[self.states.index(state)] if state in self.states else None


class JobHistory:
    """Every transition of one job, from its latest snapshot and its recorded events."""

    def __init__(self, snapshot: Mapping[str, Any], events: Iterable[Any] = ()) -> None:
        self.snapshot = snapshot
        self.job_id = str(snapshot.get("job_id", ""))
        self._attempts: dict[tuple[str, int], dict[int, _Attempt]] = {}
        statuses = {(float(at), str(status))
                    for status, at in (snapshot.get("status_timestamps") or {}).items()}
        for vertex in snapshot.get("vertices", ()):
            for subtask in vertex.get("subtasks", ()):
                kept = self._attempts.setdefault((str(vertex["id"]), int(subtask["subtask"])),
                                                 {})
                for data in subtask.get("attempts") or ():
                    attempt = _Attempt(str(data.get("attempt_id", "")), int(data["attempt"]),
                                       slot=data.get("slot"), failure=data.get("failure"),
                                       input_splits=list(data.get("input_splits") or ()),
                                       epoch=int(data.get("epoch") or 0))
                    for state, at in (data.get("state_timestamps") or {}).items():
                        attempt.add(float(at), str(state))
                    kept[attempt.attempt] = attempt
        for event in events:
            if getattr(event, "job_id", self.job_id) != self.job_id:
                continue
            if hasattr(event, "attempt_id"):
                self._add_event(event)
            elif hasattr(event, "new"):
                statuses.add((float(event.at), str(event.new)))
        self._statuses = sorted(statuses)

    def _add_event(self, event: Any) -> None:
        kept = self._attempts.get((str(event.vertex_id), int(event.subtask)))
        if kept is None:
            return  # not a subtask of this job's shape
        attempt = kept.get(int(event.attempt))
        if attempt is None:
            attempt = kept[int(event.attempt)] = _Attempt(str(event.attempt_id),
                                                          int(event.attempt))
        attempt.add(float(event.at), str(event.new))
        if attempt.slot is None and event.taskmanager_id is not None:
            attempt.slot = {"taskmanager_id": event.taskmanager_id,
                            "slot_index": event.slot_index}
        if attempt.failure is None and event.failure:
            attempt.failure = dict(event.failure)

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
        if self.status_at(float("inf")) in TERMINAL_JOB:
            times = [t for t, _ in self._statuses[-1:]]
            times += [a.times[-1] for attempts in self._attempts.values()
                      for a in attempts.values() if a.times]
            return max(max(times), self.start)
        return max(time.time(), self.start)

    def status_at(self, t: float) -> str:
        index = bisect.bisect_right(self._statuses, (t, "\uffff"))
        return self._statuses[index - 1][1] if index else "CREATED"

    # -- the snapshot of a moment -------------------------------------------------------------

    def at(self, t: float) -> dict[str, Any]:
        """The snapshot dict as it was at ``t`` (wall clock seconds)."""
        finished = total = 0
        vertices = []
        for vertex in self.snapshot.get("vertices", ()):
            subtasks = []
            counts: dict[str, int] = {}
            for subtask in vertex.get("subtasks", ()):
                index = int(subtask["subtask"])
                attempts = self._attempts_at(str(vertex["id"]), index, t)
                state = attempts[-1]["state"]
                counts[state] = counts.get(state, 0) + 1
                finished += state == "FINISHED"
                total += 1
                subtasks.append({"id": subtask.get("id", f"{vertex['id']}#{index}"),
                                 "subtask": index, "state": state,
                                 "attempt_id": attempts[-1]["attempt_id"],
                                 "attempts": attempts})
            vertices.append({**{k: v for k, v in vertex.items() if k != "subtasks"},
                             "state_counts": counts, "subtasks": subtasks})
        failures = [f for f in self.snapshot.get("failures") or ()
                    if float(f.get("timestamp") or 0.0) <= t]
        root = self.snapshot.get("root_cause")
        return {**{k: v for k, v in self.snapshot.items() if k not in ("vertices", "failures")},
                "status": self.status_at(t),
                "status_timestamps": {s: at for at, s in self._statuses if at <= t},
                "progress": {"finished": finished, "total": total},
                "vertices": vertices, "failures": failures,
                "root_cause": root if root and float(root.get("timestamp") or 0.0) <= t
                else None,
                "replay_at": t}

    def _attempts_at(self, vertex_id: str, subtask: int, t: float) -> list[dict[str, Any]]:
        shown = []
        for number in sorted(self._attempts.get((vertex_id, subtask), {})):
            attempt = self._attempts[(vertex_id, subtask)][number]
            state = attempt.state_at(t)
            if state is None:
                continue
            deployed = attempt.time_of("DEPLOYING")
            ended = next((at for at, s in zip(attempt.times, attempt.states, strict=True)
                          if s in TERMINAL_EXECUTION and at <= t), None)
            shown.append({
                "attempt_id": attempt.attempt_id, "attempt": attempt.attempt, "state": state,
                "slot": attempt.slot if deployed is not None and deployed <= t else None,
                "state_timestamps": {s: at for at, s in zip(attempt.times, attempt.states,
                                                            strict=True) if at <= t},
                "start_time": deployed if deployed is not None and deployed <= t else None,
                "end_time": ended,
                "failure": attempt.failure if state == "FAILED" else None,
                "input_splits": attempt.input_splits, "epoch": attempt.epoch})
        if not shown:
            shown.append({"attempt_id": f"{self.job_id}/{vertex_id}#{subtask}/a0", "attempt": 0,
                          "state": "CREATED", "slot": None, "state_timestamps": {},
                          "start_time": None, "end_time": None, "failure": None,
                          "input_splits": [], "epoch": 0})
        return shown
