"""A job's chain of causes, as data: what ``JobGraphSnapshot.causes`` carries to observers.

The JobMaster gives every event of a failover an id and links it to the event that
caused it (``clusterdeck.core.executiongraph.causes``): a TaskManager lost, the attempts
it ran failed, their region restarted, the checkpoint in progress aborted, the region
restored from checkpoint N. Each event carries its evidence: the message that brought
it to the JobMaster (type, sender, time) and log lines of the processes involved (a
failed task's last lines from its TaskManager, the JobManager's line on its decision).

The chain travels in the job's retained snapshot, so the recorder keeps it like any
message and a recording opened offline draws the same tree. Bounded, so a restart loop
cannot grow a snapshot past its frame: at most ``EVENTS_KEPT`` events (the JobMaster
drops the oldest trees first, never the job's root cause), ``DEPTH_KEPT`` levels, and
``LINES_KEPT`` log lines of ``TEXT_KEPT`` characters each. The codec checks the types;
``check_cause_chain`` checks the bounds and the links, on the observer's side.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

EVENTS_KEPT = 48
"""Events one chain holds: a dozen failovers of four or five events each."""
DEPTH_KEPT = 8
"""Levels of one tree: a lost TaskManager, a producer's lost partitions, its consumer's
failure, the restart, the restore is five; deeper links go to the deepest allowed."""
LINES_KEPT = 5
"""Log lines of one event's evidence: its end, where it struck."""
TEXT_KEPT = 300
"""Characters of a summary, a log line or a message's field."""
SIBLINGS_KEPT = 8
"""Failed attempts kept under one cause; the rest are counted (``CauseEvent.more``)."""


class CauseKind(StrEnum):
    TASKMANAGER_LOST = "taskmanager-lost"
    ATTEMPT_FAILED = "attempt-failed"
    REGION_RESTARTED = "region-restarted"
    JOB_RESTARTED = "job-restarted"  # a full failover
    CHECKPOINT_ABORTED = "checkpoint-aborted"
    RESTORED = "restored"  # from checkpoint ``checkpoint_id``; 0: from the start
    JOB_FAILED = "job-failed"
    TASKMANAGER_BLOCKED = "taskmanager-blocked"  # the job gives it no new work a while
    JOB_RESCALED = "job-rescaled"  # reactive mode, autoscaler: run on at another parallelism


@dataclass(frozen=True)
class CarriedBy:
    """The message that brought an event to the JobMaster: its type name, its sender
    (a TaskManager id, ``resourcemanager``, or the JobMaster itself for a decision of
    its own) and when it arrived."""

    type: str
    sender: str
    at: float


@dataclass(frozen=True)
class EvidenceLine:
    """One log line of a process involved; ``at`` 0 when its time is not known."""

    process: str
    line: str
    at: float = 0.0


@dataclass(frozen=True)
class CauseEvent:
    """One event of a failover. ``cause_id`` is the event that caused it (None: a root
    cause). An attempt's failure names its attempt (``attempt_id``, ``vertex_id``,
    ``subtask``); a lost TaskManager its id; a checkpoint or a restore its checkpoint.
    ``more``: events like this one, of the same cause, counted but not kept (a lost
    TaskManager that ran hundreds of attempts keeps ``SIBLINGS_KEPT`` of their
    failures)."""

    id: int
    kind: CauseKind
    at: float
    summary: str
    cause_id: int | None = None
    carried_by: CarriedBy | None = None
    log_lines: tuple[EvidenceLine, ...] = ()
    taskmanager_id: str = ""
    attempt_id: str = ""
    vertex_id: str = ""
    subtask: int = -1
    checkpoint_id: int = 0
    more: int = 0


@dataclass(frozen=True)
class CauseChain:
    """Every event kept, oldest first; ``dropped`` counts those left out (older trees)."""

    events: tuple[CauseEvent, ...] = ()
    dropped: int = 0

    def roots(self) -> tuple[CauseEvent, ...]:
        return tuple(event for event in self.events if event.cause_id is None)

    def children(self, event_id: int) -> tuple[CauseEvent, ...]:
        return tuple(event for event in self.events if event.cause_id == event_id)


def check_cause_chain(chain: CauseChain) -> None:
    """ValueError for a chain no honest JobMaster sends: over the bounds, an id twice, a
    link to an event it does not hold, a cycle, a tree deeper than ``DEPTH_KEPT``."""
    if len(chain.events) > EVENTS_KEPT or chain.dropped < 0 or \
            any(event.more < 0 for event in chain.events):
        raise ValueError(f"a chain of causes holds at most {EVENTS_KEPT} events")
    causes = {event.id: event.cause_id for event in chain.events}
    if len(causes) != len(chain.events):
        raise ValueError("an event id appears twice in the chain of causes")
    for event in chain.events:
        texts = (event.summary, event.taskmanager_id, event.attempt_id, event.vertex_id,
                 *(f.line for f in event.log_lines), *(f.process for f in event.log_lines),
                 *((event.carried_by.type, event.carried_by.sender) if event.carried_by
                   else ()))
        if len(event.log_lines) > LINES_KEPT or any(len(t) > TEXT_KEPT for t in texts):
            raise ValueError(f"event {event.id} of the chain of causes is too long")
        depth, cause = 1, event.cause_id
        while cause is not None:
            if cause not in causes:
                raise ValueError(f"event {event.id} names a cause {cause} the chain lacks")
            depth, cause = depth + 1, causes[cause]
            if depth > DEPTH_KEPT:
                raise ValueError(f"event {event.id} is deeper than {DEPTH_KEPT} levels, "
                                 "or its causes form a cycle")


def cut(text: str) -> str:
    """``text`` within ``TEXT_KEPT`` characters: its start, and ``…`` when longer."""
    return text if len(text) <= TEXT_KEPT else text[:TEXT_KEPT - 1] + "…"
