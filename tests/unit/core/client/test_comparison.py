"""Two runs side by side (core/client/comparison.py)."""

from __future__ import annotations

from clusterdeck.core.client.comparison import RunSummary, compare, format_rows
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.snapshots import (
    AttemptSnapshot,
    JobGraphSnapshot,
    JobProgress,
    SubtaskSnapshot,
    VertexSnapshot,
)
from clusterdeck.core.protocol.states import ExecutionState, JobStatus

RUNNING, FINISHED, FAILED = ExecutionState.RUNNING, ExecutionState.FINISHED, ExecutionState.FAILED


def attempt(number: int, state: ExecutionState, start: float, end: float) -> AttemptSnapshot:
    return AttemptSnapshot(f"a{number}", number, state, state_timestamps={RUNNING: start},
                           end_time=end)


def vertex(vertex_id: str, name: str, *attempts: list[AttemptSnapshot]) -> VertexSnapshot:
    subtasks = tuple(SubtaskSnapshot(f"{vertex_id}#{i}", i, tries[-1].state, tries[-1].attempt_id,
                                     tuple(tries)) for i, tries in enumerate(attempts))
    return VertexSnapshot(vertex_id, name, len(subtasks), False, False, (), {}, subtasks)


def run(job_id: str, duration: float, *vertices: VertexSnapshot,
        status: JobStatus = JobStatus.FINISHED) -> tuple[JobGraphSnapshot, p.JobResult]:
    snapshot = JobGraphSnapshot(job_id, "wordcount", 0, JobKind.DATAFLOW, status,
                                {JobStatus.CREATED: 100.0, status: 100.0 + duration},
                                JobProgress(0, 0), vertices)
    records = {"vertex-1": {"in": 1000, "out": 9000}, "vertex-2": {"in": 9000, "out": 120}}
    return snapshot, p.JobResult(job_id, "wordcount", status, duration, records=records)


def test_a_slower_vertex_and_a_retried_one_stand_out():
    first = RunSummary.of(*run("job-a", 10.0,
                               vertex("vertex-1", "read", [attempt(0, FINISHED, 101, 105)]),
                               vertex("vertex-2", "count", [attempt(0, FINISHED, 105, 108)])))
    second = RunSummary.of(*run("job-b", 16.0,
                                vertex("vertex-1", "read", [attempt(0, FAILED, 101, 102),
                                                            attempt(1, FINISHED, 103, 111)]),
                                vertex("vertex-2", "count", [attempt(0, FINISHED, 111, 114)])))

    rows = {(row.what, row.measure): row for row in compare(first, second)}

    job_time = rows[("job", "duration (s)")]
    assert (job_time.first, job_time.second, job_time.change, job_time.worse) == (
        "10.00", "16.00", "+60%", True)
    read = rows[("read", "duration (s)")]
    assert (read.first, read.second, read.worse) == ("4.00", "10.00", True)
    assert rows[("read", "failed attempts")].second == "1"
    count = rows[("count", "duration (s)")]
    assert count.worse is None and count.change == ""  # 3 s both times
    assert rows[("count", "records out")].second == "120"
    text = format_rows(compare(first, second))
    assert "read" in text and "+60%" in text


def test_vertices_are_matched_by_name_when_the_job_changed():
    first = RunSummary.of(*run("job-a", 5.0, vertex("vertex-1", "read",
                                                    [attempt(0, FINISHED, 100, 101)])))
    second = RunSummary.of(*run("job-b", 5.0,
                                vertex("vertex-1", "parse", [attempt(0, FINISHED, 100, 101)]),
                                vertex("vertex-2", "read", [attempt(0, FINISHED, 101, 103)])))
    names = [row.what for row in compare(first, second) if row.measure == "duration (s)"]
    assert names == ["job", "read", "parse"]
    read = next(row for row in compare(first, second)
                if (row.what, row.measure) == ("read", "duration (s)"))
    assert (read.first, read.second) == ("1.00", "2.00")


def test_a_running_or_failed_run_shows_what_is_known():
    running = RunSummary.of(run("job-a", 5.0, vertex("vertex-1", "read",
                                                     [attempt(0, RUNNING, 100, None)]),
                                status=JobStatus.RUNNING)[0])
    failed = RunSummary.of(*run("job-b", 5.0, vertex("vertex-1", "read",
                                                     [attempt(0, FAILED, 100, 101)]),
                                status=JobStatus.FAILED))
    rows = {(row.what, row.measure): row for row in compare(running, failed)}
    assert rows[("read", "duration (s)")].first == "\u2013"  # still running: no time yet
    assert rows[("job", "status")].second == "FAILED"
