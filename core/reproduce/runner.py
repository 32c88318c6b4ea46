"""Running a reproduction folder: the failed subtask again, in this process, on
``local[N]`` Spark, through the engine's own entry points (``run_subtask``, and
``run_stream_subtask`` in streamrun.py), as a TaskManager's slot thread runs it.

The job is loaded from the folder's copy of its artifact, bound to the graph it was
submitted with, whose sinks are pointed at ``output/`` (the job's own output folders are
never touched) and, for a script, whose arguments point at the copies in ``input/``.
The outcome is compared with the failure the cluster recorded: exception type, message
and the last frame in the job's own files.

``--pdb``: a post-mortem at the failing frame, when the user's code failed in this
process; a dataflow chain that local execution can run (core/engine/localexecution.py)
runs in this process whatever its size, so it does. A failure inside a Spark Python
worker (a script's UDF, a streaming chain) has only its traceback here: it is printed.
``--debugpy PORT``: waits for an editor to attach before running (debugpy must be
installed), which then stops where its own breakpoints or exception settings say.
"""

from __future__ import annotations

import os
import pdb
import re
import sys
import types
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from clusterdeck.core.engine.exchange import InputPartition, result_partition_path
from clusterdeck.core.engine.localexecution import DEFAULT_MAX_RECORDS
from clusterdeck.core.engine.runtime import run_subtask
from clusterdeck.core.engine.sparkstatus import with_spark_cause
from clusterdeck.core.engine.sparkwatch import SparkWatch
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.errors import JobLoadError, SubtaskFailed
from clusterdeck.core.jobapi.loader import LoadedJob, load_job
from clusterdeck.core.jobapi.sinkfolders import initialize_sinks
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind, JobVertex
from clusterdeck.core.protocol.wiring import ResultPartitionRef
from clusterdeck.core.reproduce.folder import (
    OUTPUT,
    ExpectedFailure,
    Reproduction,
    ReproductionError,
    expected_failure,
    inside,
    read_manifest,
)
from clusterdeck.core.taskmanager.runner import UserCodeFailure

DEBUG_MAX_RECORDS = 1_000_000
"""Records a chain runs in this process when debugging (its input then sits in memory)."""
_REFUSED_SPARK_KEYS = ("spark.master", "spark.remote", "spark.api.mode",
                       "spark.submit.deployMode")

_PY_PATH = re.compile(r"""(?<![^\s("'])(?:[A-Za-z]:)?(?:[\\/][^\s:()'"\\/]+)+?[\\/]"""
                      r"""([^\s:()'"\\/]+\.py)\b""")
EXIT_DID_NOT_FAIL = 0
EXIT_FAILED = 1


@dataclass(frozen=True)
class Outcome:
    """How the run ended: the failure it raised (None: it finished), and whether that is
    the failure the cluster recorded."""

    failure: ExpectedFailure | None
    same: bool
    error: BaseException | None = None


def run_reproduction(folder: Path, *, post_mortem: bool = False,
                     debugpy_port: int | None = None, timeout: float = 300.0,
                     out: TextIO = sys.stderr) -> int:
    """Run the folder's subtask; prints its failure and the comparison on ``out``;
    returns the exit code (EXIT_FAILED when the subtask failed, as it should)."""
    folder = folder.resolve()
    reproduction = read_manifest(folder)
    if debugpy_port is not None:
        _wait_for_editor(debugpy_port, out)
    job = _load(folder, reproduction)
    spark = _spark_session(reproduction)
    try:
        outcome = run_loaded(spark, job, folder, reproduction, debugging=post_mortem
                             or debugpy_port is not None, timeout=timeout)
    finally:
        spark.stop()
    return report(outcome, reproduction, out, post_mortem)


def run_loaded(spark: Any, job: LoadedJob, folder: Path, reproduction: Reproduction, *,
               debugging: bool = False, timeout: float = 300.0) -> Outcome:
    """The subtask run once on ``spark``; its failure compared with the expected one."""
    attempt_id = f"{reproduction.job_id}/{reproduction.vertex_id}#{reproduction.subtask}" \
                 f"/local-{uuid.uuid4().hex[:6]}"
    watch = SparkWatch(lambda: spark.sparkContext, attempt_id) \
        if job.kind is JobKind.PYSPARK_SCRIPT else None
    try:
        if job.kind is JobKind.STREAMING:
            from clusterdeck.core.reproduce.streamrun import run_streaming
            run_streaming(spark, job, folder, reproduction, timeout)
        else:
            _run_batch(spark, job, folder, reproduction, attempt_id, debugging)
    except SubtaskFailed as failure:
        reported = UserCodeFailure(failure)
        message = reported.user_message
        if watch is not None:  # as the TaskManager names a script's failure
            message = with_spark_cause(message, watch.poll())
        job_files = {path.name for path in inside(folder, "job").rglob("*.py")}
        seen = expected_failure(reported.exception_type, message, failure.traceback_text,
                                job_files)
        expected = reproduction.expected
        same = (seen.exception_type, without_folders(seen.message), seen.file,
                seen.line) == (expected.exception_type, without_folders(expected.message),
                               expected.file, expected.line)
        return Outcome(seen, same, failure)
    return Outcome(None, False)


def without_folders(message: str) -> str:
    """``message`` with every path of a Python file reduced to the file's name: Spark's
    messages name the script where it ran (``collect at /srv/.../job.py:12``), on the
    cluster a TaskManager's folder, here the reproduction's."""
    return _PY_PATH.sub(r"\1", message)


def _run_batch(spark: Any, job: LoadedJob, folder: Path, reproduction: Reproduction,
               attempt_id: str, debugging: bool) -> None:
    if job.kind is JobKind.DATAFLOW:
        initialize_sinks(job.graph)
    splits = [replace(split, path=str(inside(folder, split.path))) if split.path else split
              for split in reproduction.splits]
    inputs: dict[int, list[InputPartition]] = {}
    for copied in reproduction.inputs:
        path = result_partition_path(inside(folder, copied.producer_dir),
                                     reproduction.vertex_id, copied.input_index,
                                     copied.partition)
        inputs.setdefault(copied.input_index, []).append(InputPartition(
            path, reproduction.vertex_id, copied.input_index, ResultPartitionRef(
                copied.producer_attempt_id, copied.producer_vertex_id,
                copied.producer_subtask, copied.partition)))
    run_subtask(spark, job, reproduction.vertex_id, reproduction.subtask, attempt_id,
                [inputs[index] for index in sorted(inputs)], iter(splits),
                folder / OUTPUT / "partitions", first=True,
                local_max_records=DEBUG_MAX_RECORDS if debugging else DEFAULT_MAX_RECORDS)


def _load(folder: Path, reproduction: Reproduction) -> LoadedJob:
    graph = local_graph(reproduction, folder)
    try:
        return load_job(inside(folder, reproduction.job_file), reproduction.args,
                        expected=graph)
    except JobLoadError as error:
        raise ReproductionError(f"the job's file does not load here: {error}") from None


def local_graph(reproduction: Reproduction, folder: Path) -> JobGraph:
    """The job's graph with its sinks writing into ``output/`` and a script's arguments,
    folder and name pointing into the folder."""
    def local(vertex: JobVertex) -> JobVertex:
        operators = []
        for op in vertex.operators:
            params = dict(op.params)
            if op.kind.startswith("sink.") and "path" in params:
                params["path"] = str(folder / OUTPUT / op.id)
            if op.kind == plan.PYSPARK_SCRIPT:
                params.update(args=[_script_argument(folder, arg)
                                    for arg in reproduction.script_args],
                              cwd=str(folder),
                              script=str(inside(folder, reproduction.job_file)),
                              conf=dict(reproduction.spark_conf))
            operators.append(replace(op, params=params))
        return replace(vertex, operators=tuple(operators))
    graph = reproduction.graph
    return replace(graph, vertices=tuple(local(vertex) for vertex in graph.vertices))


def _script_argument(folder: Path, argument: str) -> str:
    """A copied file's argument as a path in the folder; any other as it was."""
    if argument.startswith("input/"):
        return str(inside(folder, argument))
    return argument


def _spark_session(reproduction: Reproduction) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(f"local[{reproduction.cores}]").appName(
        f"clusterdeck-reproduce-{reproduction.job_name}")
    # The UI on a free port, as a TaskManager's: a script's failure is named by what
    # its REST API says failed (sparkwatch.py), on the cluster and here alike.
    settings = {"spark.ui.enabled": "true", "spark.ui.port": "0",
                "spark.ui.showConsoleProgress": "false",
                "spark.sql.shuffle.partitions": str(max(2, reproduction.cores))}
    settings.update({key: value for key, value in reproduction.spark_conf.items()
                     if key.startswith("spark.") and key not in _REFUSED_SPARK_KEYS})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _wait_for_editor(port: int, out: TextIO) -> None:
    try:
        import debugpy  # type: ignore[import-not-found]
    except ImportError:
        raise ReproductionError("--debugpy needs debugpy: pip install debugpy (or use "
                                "--pdb)") from None
    debugpy.listen(("127.0.0.1", port))
    print(f"waiting for an editor to attach to debugpy on 127.0.0.1:{port} ...", file=out,
          flush=True)
    debugpy.wait_for_client()


def report(outcome: Outcome, reproduction: Reproduction, out: TextIO,
           post_mortem: bool = False) -> int:
    expected = reproduction.expected
    where = f" at {expected.file}:{expected.line}" if expected.line else ""
    if outcome.failure is None:
        print(f"the subtask did not fail here; on the cluster it failed with "
              f"{expected.exception_type}: {expected.message}{where}", file=out)
        return EXIT_DID_NOT_FAIL
    seen = outcome.failure
    print(seen.traceback.rstrip(), file=out)
    at = f" at {seen.file}:{seen.line}" if seen.line else ""
    print(f"failed: {seen.exception_type}: {seen.message}{at}", file=out)
    if outcome.same:
        print(f"reproduced: the same failure as attempt {reproduction.attempt} of "
              f"{reproduction.vertex_id}#{reproduction.subtask} on the cluster", file=out)
    else:
        print(f"not the same failure: on the cluster it was {expected.exception_type}: "
              f"{expected.message}{where}", file=out)
    if post_mortem and outcome.error is not None:
        _post_mortem(outcome.error, out)
    return EXIT_FAILED


def _post_mortem(error: BaseException, out: TextIO) -> None:
    """pdb at the innermost frame of the first exception in the chain raised in this
    process by the user's code."""
    trace = _users_traceback(error)
    if trace is None:
        print("pdb: the failure was raised in a Spark Python worker, not in this process: "
              "its traceback is above", file=out)
        return
    pdb.post_mortem(trace)


def _users_traceback(error: BaseException) -> types.TracebackType | None:
    seen: set[int] = set()
    current: BaseException | None = error
    found = None
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if not isinstance(current, SubtaskFailed) and current.__traceback__ is not None:
            found = current.__traceback__
        current = current.__cause__ or current.__context__
    return found
