"""A job's result, as Flink's JobResult: assembled once when the job ends, from what
its subtasks reported, with its root cause and failure history as flat records.

A JobResult is published once, kept by the Dispatcher and sent again to every client that
asks, so it must stay under ``rpc.framesize`` however large the job is (``fitted``). What
grows with the job is spilled: the lists of output and collected-row files go to a
manifest file in the job's work dir once they are long (a collect() sink writes one file
per subtask: at 2,000 subtasks the list alone is larger than a frame), and the printed
output keeps its end. The message then names the manifest;
``clusterdeck.core.client.jobclient`` reads it back.

Every root cause goes through ``failure_cause``: a task's FailureRecord, or a failure of
no task (the job could not start, its JobMaster failed, its stored record broke), in
one form with its traceback cut to what a message can carry. Pure functions, called on
the JobMaster's (or the Dispatcher's) main thread.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.jobmanager.jobstore import write_atomically
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.protocol.workdir import FILES_MANIFEST

MAX_HISTORY = 20  # failures kept in a JobResult; the snapshot has them all
TRACEBACK_KEPT = 6000  # characters of a traceback a record keeps: its end, where it struck
FILES_KEPT = 50  # file names a JobResult lists itself; the manifest has them all


def failure_cause(cause: FailureRecord | str, message: str = "",
                  traceback: str = "") -> dict[str, Any]:
    """A root cause in FailureRecord.to_dict()'s form: ``cause`` a task's FailureRecord,
    or the exception type of a failure of no task, with its ``message`` and
    ``traceback``. Long tracebacks keep their end."""
    record = cause.to_dict() if isinstance(cause, FailureRecord) else {
        "exception_type": cause, "message": message, "traceback": traceback,
        "vertex_id": "", "subtask": -1}
    return {**record, "traceback": str(record.get("traceback", ""))[-TRACEBACK_KEPT:]}


def job_result(graph: ExecutionGraph, name: str, status: JobStatus, duration: float,
               results: list[p.TaskResult], work_dir: Path,
               root_cause: dict[str, Any] | None = None) -> p.JobResult:
    """The result of a job whose graph ran: ``results`` are what its subtasks reported
    (FINISHED: every subtask's), fitted into one message (``fitted``)."""
    finished, total = graph.progress()
    accumulators: dict[str, Any] = {}
    for result in results:
        for counter, value in result.counters.items():
            accumulators[counter] = accumulators.get(counter, 0) + value
    return fitted(p.JobResult(
        job_id=graph.job_id, name=name, status=status,
        duration=round(duration, 3), accumulators=accumulators,
        records=_records_per_vertex(graph),
        outputs=tuple(dict.fromkeys(o for r in results for o in r.outputs)),
        collected_paths=tuple(r.collected_path for r in _ordered_results(graph)
                              if r.collected_path) if status is JobStatus.FINISHED else (),
        stdout="".join(r.stdout for r in results), stderr="".join(r.stderr for r in results),
        stdout_paths=tuple(r.stdout_path for r in results if r.stdout_path),
        stderr_paths=tuple(r.stderr_path for r in results if r.stderr_path),
        root_cause=root_cause, failures=len(graph.failures), finished=finished,
        total=total, failure_history=tuple(
            failure_cause(f) for f in graph.failures[-MAX_HISTORY:])),
        work_dir)


def failed_outside_graph(job_id: str, name: str, root_cause: dict[str, Any],
                         progress: tuple[int, int] = (0, 0)) -> p.JobResult:
    """The result of a job that failed on no task: it could not start, or its JobMaster
    failed; ``progress`` is (finished, total) subtasks when it failed."""
    finished, total = progress
    return p.JobResult(job_id, name, JobStatus.FAILED, duration=0.0, root_cause=root_cause,
                       failures=1, finished=finished, total=total)


def fitted(result: p.JobResult, work_dir: Path) -> p.JobResult:
    """``result``, with long file lists spilled to a manifest and long output cut."""
    result = replace(result, stdout=p.printed_tail(result.stdout),
                     stderr=p.printed_tail(result.stderr),
                     stdout_paths=result.stdout_paths[:FILES_KEPT],
                     stderr_paths=result.stderr_paths[:FILES_KEPT])
    if len(result.outputs) <= FILES_KEPT and len(result.collected_paths) <= FILES_KEPT:
        return result
    manifest = work_dir / FILES_MANIFEST
    work_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(manifest, json.dumps({"outputs": list(result.outputs),
                                           "collected_paths": list(result.collected_paths)}
                                          ).encode())
    return replace(result, outputs=result.outputs[:FILES_KEPT],
                   collected_paths=result.collected_paths[:FILES_KEPT],
                   files_manifest=str(manifest), outputs_total=len(result.outputs),
                   collected_total=len(result.collected_paths))


def bare(result: p.JobResult) -> p.JobResult:
    """The last resort when even a fitted result exceeds the frame (user counters or
    failure records too large): status, counts and where to look, nothing else."""
    return replace(result, accumulators={}, records={}, stdout="", failure_history=(), spark=(),
                   root_cause=None, outputs=(), collected_paths=(),
                   stderr="[the job's result was larger than rpc.framesize: counters, "
                   "output and failure records left out; see `clusterdeck failures` and "
                   "the attempt logs]\n")


def _ordered_results(graph: ExecutionGraph) -> list[p.TaskResult]:
    return [s.current.result for s in graph.subtasks()
            if isinstance(s.current.result, p.TaskResult)]


def _records_per_vertex(graph: ExecutionGraph) -> dict[str, Any]:
    records: dict[str, Any] = {}
    for subtask in graph.subtasks():
        result = subtask.current.result
        if isinstance(result, p.TaskResult):
            entry = records.setdefault(subtask.vertex_id, {"in": 0, "out": 0})
            entry["in"] += result.records_in
            entry["out"] += result.records_out
    return records
