"""Two runs of a job side by side: how long each vertex took, what it read and wrote, what
failed (docs/comparing.md).

A run is read from its ExecutionGraph snapshot and, once it ended, its JobResult: from
the live cluster, from the window's memory or from a recording, all the same. A vertex's
time is from its first attempt running to its last attempt ending (the stretch a user
sees on the timeline). Vertices are matched by id, and by name when the ids differ (the
job file changed between the runs). Plain data: the command line prints it, the window
draws it.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot, Truncation, VertexSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus

SIGNIFICANT = 0.10  # a change this large (10 %) is marked as slower, faster, more, fewer


@dataclass(frozen=True)
class VertexRun:
    name: str
    parallelism: int
    duration: float | None
    records_in: int | None
    records_out: int | None
    failed_attempts: int


@dataclass(frozen=True)
class RunSummary:
    job_id: str
    name: str
    status: str
    duration: float | None
    failures: int
    vertices: dict[str, VertexRun]
    root_cause: str = ""
    partial: bool = False  # the snapshot left out subtasks: vertex times are of those kept

    @staticmethod
    def of(snapshot: JobGraphSnapshot, result: p.JobResult | None = None) -> RunSummary:
        records = result.records if result is not None else {}
        vertices = {v.id: _vertex(v, records.get(v.id)) for v in snapshot.vertices}
        cause = snapshot.root_cause
        return RunSummary(
            snapshot.job_id, snapshot.name, str(snapshot.status),
            float(result.duration) if result is not None and result.duration is not None
            else _job_duration(snapshot),
            max(len(snapshot.failures), result.failures if result is not None else 0),
            vertices, f"{cause.exception_type}: {cause.message}" if cause else "",
            snapshot.truncated is not Truncation.NONE)


@dataclass(frozen=True)
class ComparisonRow:
    """One line of the comparison: ``what`` (a vertex's name, or "job"), the measure, the
    two values as shown, and the change from the first run to the second."""

    what: str
    measure: str
    first: str
    second: str
    change: str = ""
    worse: bool | None = None  # True: the second run is slower / failed more; None: equal


def compare(first: RunSummary, second: RunSummary) -> list[ComparisonRow]:
    rows = [
        ComparisonRow("job", "id", first.job_id, second.job_id),
        ComparisonRow("job", "status", first.status, second.status,
                      worse=_status_worse(first.status, second.status)),
        _number("job", "duration (s)", first.duration, second.duration, lower_better=True),
        _number("job", "failures", first.failures, second.failures, lower_better=True),
    ]
    if first.root_cause or second.root_cause:
        rows.append(ComparisonRow("job", "root cause", first.root_cause or "\u2013",
                                  second.root_cause or "\u2013"))
    for name, a, b in _matched(first, second):
        rows += [
            ComparisonRow(name, "parallelism", _shown(a and a.parallelism),
                          _shown(b and b.parallelism)),
            _number(name, "duration (s)", a and a.duration, b and b.duration,
                    lower_better=True),
            _number(name, "records in", a and a.records_in, b and b.records_in),
            _number(name, "records out", a and a.records_out, b and b.records_out),
            _number(name, "failed attempts", a and a.failed_attempts,
                    b and b.failed_attempts, lower_better=True),
        ]
    return rows


def format_rows(rows: list[ComparisonRow]) -> str:
    """The comparison as a text table (the command line)."""
    header = ("", "", "first", "second", "change")
    table = [header, *((r.what, r.measure, r.first, r.second, r.change) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(5)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths,
                                                                        strict=True)).rstrip()
                     for line in table)


def _vertex(vertex: VertexSnapshot, records: dict[str, int] | None) -> VertexRun:
    attempts = [a for s in vertex.subtasks for a in s.attempts]
    started = [a.state_timestamps.get(ExecutionState.RUNNING) for a in attempts]
    ended = [a.end_time for a in attempts]
    first = min((t for t in started if t is not None), default=None)
    last = max((t for t in ended if t is not None), default=None)
    done = all(s.state is ExecutionState.FINISHED for s in vertex.subtasks)
    duration = float(last - first) if first is not None and last is not None and done else None
    return VertexRun(vertex.name, vertex.parallelism, duration,
                     records.get("in") if records else None,
                     records.get("out") if records else None,
                     sum(a.state is ExecutionState.FAILED for a in attempts))


def _job_duration(snapshot: JobGraphSnapshot) -> float | None:
    stamps = snapshot.status_timestamps
    if not snapshot.status.is_terminal or JobStatus.CREATED not in stamps:
        return None
    return max(stamps.values()) - stamps[JobStatus.CREATED]


def _matched(first: RunSummary, second: RunSummary
             ) -> list[tuple[str, VertexRun | None, VertexRun | None]]:
    """Vertices in the first run's order, then the second run's own; by id when both
    runs have it with the same name, else by name."""
    by_name = {v.name: v for v in second.vertices.values()}
    used: set[int] = set()
    matched: list[tuple[str, VertexRun | None, VertexRun | None]] = []
    for vertex_id, vertex in first.vertices.items():
        other = second.vertices.get(vertex_id)
        if other is None or other.name != vertex.name:
            other = by_name.get(vertex.name)
        if other is not None:
            used.add(id(other))
        matched.append((vertex.name, vertex, other))
    matched += [(v.name, None, v) for v in second.vertices.values() if id(v) not in used]
    return matched


def _number(what: str, measure: str, a: float | None, b: float | None,
            lower_better: bool = False) -> ComparisonRow:
    if a is None or b is None:
        return ComparisonRow(what, measure, _shown(a), _shown(b))
    change = "" if a == b else f"{(b - a) / a:+.0%}" if a else f"{b - a:+,g}"
    significant = a != b and (not a or abs(b - a) > SIGNIFICANT * abs(a))
    # Less time and fewer failures are better; other numbers only differ.
    worse = (b > a) if significant and lower_better else None
    return ComparisonRow(what, measure, _shown(a), _shown(b), change, worse)


def _shown(value: float | int | None) -> str:
    if value is None:
        return "\u2013"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}"


_STATUS_RANK = {"FINISHED": 0, "CANCELED": 1, "FAILED": 2}


def _status_worse(a: str, b: str) -> bool | None:
    if a == b or a not in _STATUS_RANK or b not in _STATUS_RANK:
        return None
    return _STATUS_RANK[b] > _STATUS_RANK[a]
