"""Fitting a job's snapshot into one message.

A snapshot is retained so that a late observer can redraw the job at once, and, like every
message, it must stay under ``rpc.framesize``. A large job's full snapshot (every attempt
of every subtask, with tracebacks) does not: it is published reduced instead, first to the
current attempt of each subtask, then to per-vertex counts, and says so (``truncated``).
The events of the job carry every change in full either way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

TRACEBACK_KEPT = 2000
FAILURES_KEPT = 20


def reductions(snapshot: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The snapshot, then ever smaller versions of it."""
    yield snapshot
    yield _current_attempts_only(snapshot)
    yield _counts_only(snapshot)


def _trim_failure(failure: dict[str, Any]) -> dict[str, Any]:
    return {**failure, "traceback": str(failure.get("traceback", ""))[-TRACEBACK_KEPT:],
            "log_excerpt": list(failure.get("log_excerpt", ()))[-5:]}


def _current_attempts_only(snapshot: dict[str, Any]) -> dict[str, Any]:
    vertices = []
    for vertex in snapshot.get("vertices", ()):
        subtasks = [{**subtask, "attempts": [_trim_attempt(a) for a in subtask["attempts"][-1:]]}
                    for subtask in vertex.get("subtasks", ())]
        vertices.append({**vertex, "subtasks": subtasks})
    failures = [_trim_failure(f) for f in snapshot.get("failures", ())[-FAILURES_KEPT:]]
    root = snapshot.get("root_cause")
    return {**snapshot, "vertices": vertices, "failures": failures,
            "root_cause": _trim_failure(root) if root else None, "truncated": "attempts"}


def _trim_attempt(attempt: dict[str, Any]) -> dict[str, Any]:
    failure = attempt.get("failure")
    return {**attempt, "failure": _trim_failure(failure) if failure else None}


def _counts_only(snapshot: dict[str, Any]) -> dict[str, Any]:
    vertices = []
    for vertex in snapshot.get("vertices", ()):
        states = Counter(subtask.get("state") for subtask in vertex.get("subtasks", ()))
        vertices.append({key: value for key, value in vertex.items() if key != "subtasks"}
                        | {"subtasks": [], "state_counts": dict(states)})
    root = snapshot.get("root_cause")
    return {**snapshot, "vertices": vertices, "failures": [],
            "root_cause": _trim_failure(root) if root else None, "truncated": "subtasks"}
