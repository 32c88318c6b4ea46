"""The one place that knows how job data arrives: topics and message shapes.

A JobMaster publishes its ExecutionGraph's ``snapshot()`` retained per job on
``state/jobs/<job-id>``, wrapped in a ``JobSnapshot`` whose ``graph`` field holds the dict;
its state changes go to ``events/jobs/<job-id>``; the Dispatcher keeps the ``JobList`` and
each ended job's ``JobResult`` retained. The views are built against the snapshot dict
alone; this adapter unwraps whatever arrives into ``(job_id, snapshot)``, so a change of
the message is a change here only.

Runs on paho's network thread (called from the bridge's subscription callback): it only
looks at the message, never blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core import topics

JOB_STATE_FILTER = topics.JOB_STATES_ALL
"""Retained snapshot per job (``state/jobs/<job-id>``)."""
JOB_RESULTS_FILTER = topics.job_result("+")
"""Retained ``JobResult`` per ended job (``state/results/<job-id>``)."""
JOB_EVENTS_FILTER = topics.JOB_EVENTS_ALL
"""Job status and execution state changes (``events/jobs/<job-id>``)."""

JOB_STATE_PREFIX = topics.job_state("")


def job_snapshot(topic: str, message: Any) -> tuple[str, dict[str, Any]] | None:
    """The job id and snapshot dict carried by ``message``, or None when it carries none.

    ``message`` is a snapshot message (its ``graph`` field is the dict) or the dict
    itself. The job id comes from the message, else the snapshot, else the topic.
    """
    snapshot = message if isinstance(message, Mapping) else getattr(message, "graph", None)
    if not isinstance(snapshot, Mapping) or "vertices" not in snapshot:
        return None
    job_id = str(getattr(message, "job_id", "") or snapshot.get("job_id")
                 or topic.removeprefix(JOB_STATE_PREFIX))
    return (job_id, dict(snapshot)) if job_id else None


def busy_slots(snapshots: Mapping[str, Mapping[str, Any]]
               ) -> dict[tuple[str, int], tuple[str, str]]:
    """Which job runs in which slot: ``(taskmanager_id, slot_index) -> (job_id, subtask
    id)``, from the current attempts that hold a slot (DEPLOYING, RUNNING, CANCELING).

    The ClusterOverview counts busy slots per TaskManager but does not say whose they
    are; the job snapshots do.
    """
    holding = {"DEPLOYING", "RUNNING", "CANCELING"}
    slots: dict[tuple[str, int], tuple[str, str]] = {}
    for job_id, snapshot in snapshots.items():
        for vertex in snapshot.get("vertices", ()):
            for subtask in vertex.get("subtasks", ()):
                attempts = subtask.get("attempts") or ()
                current = attempts[-1] if attempts else {}
                slot = current.get("slot")
                if subtask.get("state") in holding and slot:
                    key = (str(slot["taskmanager_id"]), int(slot["slot_index"]))
                    slots[key] = (job_id, str(subtask.get("id", "")))
    return slots
