"""The one place that knows how job data arrives: topics and message shapes.

A JobMaster publishes its ExecutionGraph's ``snapshot()`` retained per job on
``state/jobs/<job-id>``, wrapped in a ``JobSnapshot`` whose ``graph`` field holds the
``JobGraphSnapshot`` (core/protocol/snapshots.py, checked by the codec on receipt); its
state changes go to ``events/jobs/<job-id>``; the Dispatcher keeps the ``JobList`` and
each ended job's ``JobResult`` retained. The views are built against the
``JobGraphSnapshot`` alone; this adapter unwraps whatever arrives into ``(job_id,
snapshot)``, so a change of the message is a change here only.

Runs on paho's network thread (called from the bridge's subscription callback): it only
looks at the message, never blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import ExecutionState

JOB_STATE_FILTER = topics.JOB_STATES_ALL
"""Retained snapshot per job (``state/jobs/<job-id>``)."""
JOB_RESULTS_FILTER = topics.job_result("+")
"""Retained ``JobResult`` per ended job (``state/results/<job-id>``)."""
JOB_EVENTS_FILTER = topics.JOB_EVENTS_ALL
"""Job status and execution state changes (``events/jobs/<job-id>``)."""

JOB_STATE_PREFIX = topics.job_state("")


def job_snapshot(topic: str, message: Any) -> tuple[str, JobGraphSnapshot] | None:
    """The job id and snapshot carried by ``message``, or None when it carries none.

    ``message`` is a snapshot message (its ``graph`` field is the ``JobGraphSnapshot``)
    or the snapshot itself. The job id comes from the message, else the snapshot, else
    the topic.
    """
    snapshot = message if isinstance(message, JobGraphSnapshot) else getattr(
        message, "graph", None)
    if not isinstance(snapshot, JobGraphSnapshot):
        return None
    job_id = str(getattr(message, "job_id", "") or snapshot.job_id
                 or topic.removeprefix(JOB_STATE_PREFIX))
    return (job_id, snapshot) if job_id else None


HOLDING = frozenset({ExecutionState.DEPLOYING, ExecutionState.RUNNING,
                     ExecutionState.CANCELING})
"""States in which an attempt holds its slot."""


def busy_slots(snapshots: Mapping[str, JobGraphSnapshot]
               ) -> dict[tuple[str, int], tuple[str, str]]:
    """Which job runs in which slot: ``(taskmanager_id, slot_index) -> (job_id, subtask
    id)``, from the current attempts that hold a slot (DEPLOYING, RUNNING, CANCELING).

    The ClusterOverview counts busy slots per TaskManager but does not say whose they
    are; the job snapshots do.
    """
    slots: dict[tuple[str, int], tuple[str, str]] = {}
    for job_id, snapshot in snapshots.items():
        for vertex in snapshot.vertices:
            for subtask in vertex.subtasks:
                current = subtask.current
                slot = current.slot if current is not None else None
                if subtask.state in HOLDING and slot is not None:
                    slots[(slot.taskmanager_id, slot.slot_index)] = (job_id, subtask.id)
    return slots
