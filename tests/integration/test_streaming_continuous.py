"""Streaming subtasks' long-lived Spark tasks on a real cluster (issue 35,
core/engine/continuous.py): a user's exception in a streaming function fails the job with
the user's traceback and line; the Python worker of a window subtask killed with kill -9
mid-stream fails that attempt, the job fails over to its last checkpoint and the
committed output is the undisturbed run's, each window once; a cancelled streaming job
leaves no Spark job running on any TaskManager's Spark (read from its Spark UI's REST
API, as the window's Open Spark UI reads it); the flame graph of one vertex of a running
job (``clusterdeck profile --job --vertex``, docs/profiling.md) holds its user function
and not the other vertex's."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdeck.core.cli.profilecommands import cmd_profile
from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.profiling.vertexprofile import VertexWorker, vertex_workers
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, RunningCluster, wait_result
from tests.integration.test_failover import BOTH, described
from tests.integration.test_small_subtasks import SparkUis
from tests.integration.test_streaming import committed, staged, windows_expected
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster(
    {**SPARK_UP_AND_RESTARTS, "spark.ui.enabled": "true"})]

# The keyed window count of examples/streaming_window.py (100 records a second of event
# time, ten keys, one-second windows), whose map after the window notes the pid of the
# Python worker it runs in: the window subtask's long-lived Spark task, which the test
# kills. (Not the key function: the exchange runs it in the TaskManager's process too.)
NOTED_WORKERS = '''
import os

def noted(window):
    noted = os.path.join({folder!r}, str(os.getpid()))
    if not os.path.exists(noted):
        open(noted, "w").close()
    return f"{{window[0]}},{{window[1]:g}},{{window[2]:g}},{{window[3]}}"

def build(env):
    env.set_parallelism(1)
    env.enable_checkpointing(0.5)
    (env.rate_source(int(env.args[2]), int(env.args[1]) or None)
        .assign_timestamps(lambda record: record[0] / 100, max_out_of_orderness=0.2)
        .key_by(1)
        .window(1.0).count(name="count per second")
        .map(noted)
        .write_text(env.args[0]))
'''

FAILING = '''
def parsed(record):
    if record[0] == 700:
        return int(record[1])   # the user's line: "key-0" is not a number
    return record

def build(env):
    env.set_parallelism(1)
    env.enable_checkpointing(0.5)
    env.rate_source(500, 2000).map(parsed).map(str).write_text(env.args[0])
'''
NO_RESTART = {"restart-strategy.type": "none"}
RECORDS = 12_000


@pytest.fixture(scope="module")
def spark_uis(cluster: RunningCluster) -> Iterator[SparkUis]:
    uis = SparkUis(cluster[1].client)
    try:
        yield uis
    finally:
        uis.close()


def test_a_users_exception_in_a_streaming_function_fails_the_job_with_its_line(
        client: JobClient, tmp_path: Path) -> None:
    job = tmp_path / "failing_stream.py"
    job.write_text(FAILING)
    job_id = client.submit(job, [str(tmp_path / "out")], restart_strategy=NO_RESTART)
    result = wait_result(client, job_id, 180)
    assert result.status is JobStatus.FAILED, described(result)
    cause = result.root_cause
    assert cause is not None
    assert cause["exception_type"] == "ValueError", described(result)
    assert "invalid literal for int() with base 10: 'key-0'" in cause["message"]
    assert 'failing_stream.py", line 4, in parsed' in cause["traceback"]
    assert "return int(record[1])   # the user's line" in cause["traceback"]
    assert "pyspark" not in cause["traceback"]


def test_a_killed_python_worker_fails_over_and_the_output_stays_exactly_once(
        client: JobClient, tmp_path: Path) -> None:
    out, workers = tmp_path / "out", tmp_path / "workers"
    workers.mkdir()
    job = tmp_path / "noted_workers.py"
    job.write_text(NOTED_WORKERS.format(folder=str(workers)))
    # 12 s of records, the kill as soon as the first window fired: while batches still
    # flow (a worker killed after its attempt's last batch is never needed again, and
    # the failure history asserted below would be empty)
    job_id = client.submit(job, [str(out), str(RECORDS), "1000"])
    (pid,) = wait_for(lambda: [int(path.name) for path in workers.iterdir()], 120,
                      "the window subtask's worker noted")
    os.kill(pid, signal.SIGKILL)
    result = wait_result(client, job_id, 240)
    assert result.status is JobStatus.FINISHED, described(result)
    assert result.failure_history, "the kill failed no attempt"
    # The region's first failure is recorded: the window subtask's ("the Spark Python
    # worker (pid ...) ... died or was killed", test_continuous.py) or its producer's,
    # whose consumer went away, whichever reached the JobMaster first.
    assert any(f"Spark Python worker (pid {pid})" in failure["message"]
               or "went away" in failure["message"]
               for failure in result.failure_history), described(result)
    assert committed(out) == windows_expected(RECORDS)
    assert staged(out) == []


def test_a_cancelled_streaming_job_leaves_no_spark_job_running(
        client: JobClient, cluster: RunningCluster, spark_uis: SparkUis,
        tmp_path: Path) -> None:
    cluster[1].wait_registered(BOTH, timeout=120)
    spark_uis.wait_ready(BOTH)
    workers = tmp_path / "workers"
    workers.mkdir()
    job = tmp_path / "noted_workers.py"
    job.write_text(NOTED_WORKERS.format(folder=str(workers)))
    job_id = client.submit(job, [str(tmp_path / "out"), "0", "500"])   # for ever
    # Seen from outside first, so that "none left" below is not true for want of looking.
    wait_for(lambda: (running := spark_uis.spark_jobs(job_id, "running"))
             and sum(map(len, running.values())) >= 2, 180,
             "the long-lived Spark jobs of both subtasks running")
    client.cancel(job_id)
    result = wait_result(client, job_id, timeout=120)
    assert result.status is JobStatus.CANCELED, described(result)
    wait_for(lambda: (running := spark_uis.spark_jobs(job_id, "running")) is not None
             and not any(running.values()), 60, "no Spark job of the job running")


# Two vertices, each busy in a function of its own (the key_by splits the chain): the
# first's map before the window, the second's after it, both run in their subtask's
# long-lived Spark task's Python worker.
TWO_HOT = '''
def burn_in_parse(record):
    total = 0
    for i in range(20000):
        total += i * i
    return (record[0], record[1], total)

def burn_in_count(window):
    total = 0
    for i in range(20000):
        total += i ^ 7
    return f"{window[0]},{window[3]},{total}"

def build(env):
    env.set_parallelism(1)
    env.enable_checkpointing(1.0)
    (env.rate_source(200, None)
        .map(burn_in_parse, name="parse")
        .assign_timestamps(lambda record: record[0] / 100, max_out_of_orderness=0.2)
        .key_by(1)
        .window(0.1).count(name="count")
        .map(burn_in_count, name="format")
        .write_text(env.args[0]))
'''


def test_a_vertexs_flame_graph_holds_its_own_function_and_not_the_other_vertexs(
        client: JobClient, cluster: RunningCluster, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "two_hot.py"
    job.write_text(TWO_HOT)
    job_id = client.submit(job, [str(tmp_path / "out")])   # for ever
    try:
        def spark_worker(operator: str) -> list[VertexWorker]:
            snapshot = client.snapshot(job_id)
            vertex = next(v for v in snapshot.graph.vertices
                          if operator in {op.name for op in v.operators})
            heard = client.live_metrics(1.5)
            return [w for w in vertex_workers(((m.taskmanager_id, attempt) for m in heard
                                               for attempt in m.attempts), job_id, vertex.id)
                    if w.thread == 0]
        wait_for(lambda: spark_worker("parse") and spark_worker("format"), 180,
                 "both vertices' Spark Python workers named in the live numbers")
        parse, format_ = tmp_path / "parse.collapsed", tmp_path / "format.collapsed"
        for vertex, saved, compare in (("parse", parse, None), ("format", format_, [parse])):
            assert cmd_profile(cluster[0].config, argparse.Namespace(
                process=None, job=job_id, vertex=vertex, threads=False, seconds=3.0,
                rate=100, output=saved, compare=compare)) == 0
        printed = capsys.readouterr().out
    finally:
        client.cancel(job_id)
    assert "burn_in_parse" in parse.read_text() and "burn_in_count" not in parse.read_text()
    assert "burn_in_count" in format_.read_text() and "burn_in_parse" not in \
        format_.read_text()
    assert "(pid " in printed and "thread " in printed  # its worker and its slot thread
    changes = printed[printed.index("frames whose share"):].splitlines()
    assert any(line.split()[2].startswith("+") and "burn_in_count (two_hot.py)" in line
               for line in changes[2:12]), printed
