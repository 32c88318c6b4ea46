"""TaskManagers that share nothing with the JobManager but the broker (issue 13).

Every TaskManager runs in its own mount namespace (tests/integration/namespaces.py): the
JobManager's folders and the other TaskManagers' are out of its sight, so result
partitions cross over the TaskManagers' data services, and collected rows and printed
output reach the client through the JobManager. Real broker, real processes, real Spark.
The tests share one cluster and run in file order: the last two kill TaskManagers.
"""

from __future__ import annotations

import collections
import json
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.ids import attempt_file_stem
from clusterdeck.core.protocol.snapshots import AttemptSnapshot, VertexSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.rpc import RemoteError
from tests.integration.clusters import (
    FAST_HEARTBEATS,
    ClusterWatcher,
    running_cluster,
    wait_result,
)
from tests.integration.namespaces import (
    NamespacedTaskManager,
    jobmanager_folders,
    namespaced_taskmanagers,
    skip_unless_namespaces,
    wait_registered,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
TASKMANAGER_CONFIG = {**FAST_HEARTBEATS, "taskmanager.slots": 2}
# The first TaskManager's data service speaks TLS, as it would beyond loopback, the
# second plain HTTP: partitions cross both ways, and the JobManager fetches from both.
FIRST_WITH_TLS = [{"taskmanager.data.tls": "always"}]
SETTING = {"spark.clusterdeck.test-marker": "everywhere"}
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 5,
            "restart-strategy.fixed-delay.delay": 0.2}

# Producers read and hash; each consumer subtask waits for the gate file before it ends,
# so the test can act while every producer has finished and consumers still run.
GATED_COUNT = '''
import os, time

def build(env):
    source, gate = env.args
    env.set_parallelism(4)
    env.set_job_name("gated count")

    def wait_for_gate(pair):
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
        return pair

    (env.read_text(source).flat_map(lambda line: line.split())
        .map(lambda word: (word, 1)).key_by(0).sum(1)
        .map(wait_for_gate).collect())
'''

# Three vertices: read -> (HASH by word) sum, hold -> (HASH by reversed word) reduce,
# collect. The sum subtask that gets the word __hold__ waits for the gate and drops it;
# the other sum subtasks finish, and their partitions sit unread (a consumer vertex
# starts once all its producers finished) until the test has deleted files and opened
# the gate. A key unlike the first one spreads a sum subtask's words over consumers in
# other slots, so also over the other TaskManager (which fetches, and finds none).
HELD_COUNT = '''
import os, time

def build(env):
    source, gate = env.args
    env.set_parallelism(4)
    env.set_job_name("held count")

    def released(pair):
        if pair[0] != "__hold__":
            return True
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
        return False

    (env.read_text(source).flat_map(lambda line: line.split())
        .map(lambda word: (word, 1)).key_by(0).sum(1).filter(released)
        .key_by(lambda pair: pair[0][::-1]).reduce(lambda a, b: (a[0], a[1] + b[1]))
        .collect())
'''

SCRIPT = '''
import os, sys, time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("rows", spark.range(1000).count())
print("marker", spark.conf.get("spark.clusterdeck.test-marker", "unset"))
print("app", spark.sparkContext.appName)
deadline = time.monotonic() + 120  # hold the slot until every script has one
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
'''

# About 1.1 MB on standard output, several chunks of a message each.
BIG_PRINT = '''
import pyspark  # a PySpark script, as clusterdeck tells one
for i in range(40000):
    print(f"line {i:06d} " + "x" * 14)
'''

Cluster = tuple[LocalCluster, list[NamespacedTaskManager]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A JobManager with no TaskManager of its own, and two in namespaces of their own;
    the cluster's Spark setting is in the JobManager's configuration only."""
    skip_unless_namespaces()
    folder = tmp_path_factory.mktemp("namespaced")
    with running_cluster("auto", **{"taskmanager.count": 0, **SETTING}) as (local, watcher), \
            namespaced_taskmanagers(local, 2, folder, TASKMANAGER_CONFIG,
                                    overrides=FIRST_WITH_TLS) as taskmanagers:
        wait_registered(watcher, taskmanagers)
        yield local, taskmanagers


@dataclass(frozen=True)
class Run:
    """A finished job: its result, what plain Python counted, its failures, its graph."""

    job_id: str
    result: p.JobResult
    expected: collections.Counter[str]
    failures: list[dict[str, Any]]
    snapshot: p.JobSnapshot


@pytest.fixture(scope="module")
def word_count(client: JobClient, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """examples/wordcount.py with parallelism 4 on the two TaskManagers, run once for the
    tests that look at it."""
    source, expected = words_file(tmp_path_factory.mktemp("wordcount"))
    job_id = client.submit(EXAMPLES / "wordcount.py", [source.as_uri(), "4"])
    result = wait_result(client, job_id)
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    return Run(job_id, result, expected, client.failure_history(job_id), snapshot)


def words_file(folder: Path, lines: int = 4000, extra: str = ""
               ) -> tuple[Path, collections.Counter[str]]:
    """A text file of WORDS (plus an ``extra`` line, not counted) and its word counts.
    Jobs name it by its file:// URL: the TaskManagers are other machines, which do not
    read the JobManager's local files, and see pytest's folder as a shared mount."""
    path = folder / "words.txt"
    rows = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(i % 9 + 1))
            for i in range(lines)]
    path.write_text("\n".join([*rows, extra]) + "\n", encoding="utf-8")
    return path, collections.Counter(word for row in rows for word in row.split())


def test_each_taskmanager_sees_none_of_the_jobmanagers_folders_nor_the_others(
        cluster: Cluster) -> None:
    local, taskmanagers = cluster
    # Job work dirs aside (a TaskManager writes the same paths on its own disk), every
    # file of the JobManager's: its logins, broker files, logs, configuration.
    theirs = [f for home in jobmanager_folders() for f in home.rglob("*")
              if f.is_file() and not f.is_relative_to(local.cluster_dir / "work")]
    assert local.cluster_dir / "credentials.json" in theirs
    for taskmanager in taskmanagers:  # unshare and sh exec: the pid is the TaskManager's
        assert taskmanager.sees(EXAMPLES).is_dir()  # the view is there...
        assert [f for f in theirs if taskmanager.sees(f).exists()] == []
        own = taskmanager.sees(taskmanager.own)
        assert list(own.glob("*/clusterdeck")), "its own files are not under its XDG folders"
        credentials = own / "home" / "credentials.json"
        assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
        assert not any(taskmanager.own.iterdir()), "its tmpfs leaked to this machine"
        for other in taskmanagers:
            if other is not taskmanager:
                assert not any(other.sees(taskmanager.own).iterdir())
    schemes = [re.findall(r"data service at (\w+)://", t.log.read_text()) for t in taskmanagers]
    assert schemes == [["https"], ["http"]], schemes


def test_a_word_count_over_taskmanagers_sharing_no_folder_is_exact(
        cluster: Cluster, word_count: Run) -> None:
    local, taskmanagers = cluster
    result = word_count.result
    assert result.status is JobStatus.FINISHED, _why(result)
    assert {word: count for word, count in collected_rows(result)} == dict(word_count.expected)
    assert all(Path(path).is_relative_to(local.cluster_dir) for path in result.collected_paths)
    # Each TaskManager ran counts, and one of them holds a copy of a partition with data
    # that the other wrote (fetched into the same path, as on its own disk).
    hosts = {a.attempt_id: _host(a) for v in word_count.snapshot.graph.vertices
             for s in v.subtasks for a in s.attempts}
    count = _named(word_count.snapshot, "count")
    assert {hosts[s.attempt_id] for s in count.subtasks} == {t.id for t in taskmanagers}
    partitions = local.cluster_dir / "work" / word_count.job_id / "partitions"
    copies = [(t.id, attempt_id) for t in taskmanagers for attempt_id, host in hosts.items()
              if host not in ("", t.id) and any(
                  t.sees(partitions / attempt_file_stem(attempt_id)).glob("*/__part=*/*.parquet"))]
    assert copies, "no TaskManager holds a partition the other one wrote"


def test_a_word_count_over_taskmanagers_sharing_no_folder_needs_no_failover(
        word_count: Run) -> None:
    assert [(f["exception_type"], f["message"]) for f in word_count.failures] == []


def test_a_client_on_another_machine_reads_the_results_through_the_jobmanager(
        cluster: Cluster, client: JobClient, word_count: Run, tmp_path: Path) -> None:
    """Collected rows and printed output that TaskManagers wrote on their machines reach
    a client that cannot read the JobManager's disk either: in chunks, through the
    Dispatcher. Nothing else of the JobManager's machine is served."""
    local, _ = cluster
    job_id, result = word_count.job_id, word_count.result

    def from_jobmanager(path: str, offset: int) -> Iterator[bytes]:
        return client.job_file_from_jobmanager(job_id, path, offset)

    assert dict(collected_rows(result, from_jobmanager)) == dict(word_count.expected)

    script = tmp_path / "big_print.py"
    script.write_text(BIG_PRINT, encoding="utf-8")
    printed = wait_result(client, client.submit(script, cwd=str(tmp_path)))
    assert printed.status is JobStatus.FINISHED, _why(printed)
    (path,) = printed.stdout_paths
    chunks = list(client.job_file_from_jobmanager(printed.job_id, path))
    assert len(chunks) > 1 and max(map(len, chunks)) <= local.config["rpc.framesize"] // 2
    lines = b"".join(chunks).decode().splitlines()
    assert lines == [f"line {i:06d} " + "x" * 14 for i in range(40000)]

    work_dir = local.cluster_dir / "work" / job_id
    for hostile in (local.cluster_dir / "credentials.json", work_dir / "job.zip",
                    work_dir / "collect" / ".." / ".." / ".." / "credentials.json",
                    "collect/x.json", work_dir / "partitions"):
        with pytest.raises(RemoteError, match="not a result file"):
            b"".join(client.job_file_from_jobmanager(job_id, str(hostile)))
    with pytest.raises(RemoteError, match="unknown job"):
        b"".join(client.job_file_from_jobmanager("no-such-job", path))


def test_an_input_named_by_a_url_is_read_by_any_taskmanager(client, tmp_path) -> None:
    """file:// names a shared mount: its split is bound to no host, Spark reads it."""
    source, expected = words_file(tmp_path, lines=500)
    result = wait_result(client, client.submit(EXAMPLES / "wordcount.py",
                                               [f"file://{source}", "2"]))
    assert result.status is JobStatus.FINISHED, _why(result)
    assert {word: count for word, count in collected_rows(result)} == dict(expected)


def test_clusterdeck_submit_prints_the_collected_rows_of_taskmanagers_elsewhere(
        cluster: Cluster, tmp_path: Path) -> None:
    """As a user runs it: the command, from another folder, prints every counted word."""
    local, _ = cluster
    source, expected = words_file(tmp_path, lines=1000)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "clusterdeck.core.cli", "submit", "--cluster", local.cluster_id,
         str(EXAMPLES / "wordcount.py"), "--", source.as_uri(), "4"],
        capture_output=True, text=True, timeout=300, cwd=elsewhere, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert {word: count for word, count in rows} == dict(expected)


def test_a_pyspark_scripts_output_and_the_clusters_spark_settings_reach_the_submitter(
        client, tmp_path) -> None:
    """Three scripts at once, each holding its slot until all have started: two slots per
    TaskManager, so both TaskManagers run one."""
    script, gate = tmp_path / "show.py", tmp_path / "gate"
    script.write_text(SCRIPT, encoding="utf-8")
    jobs = [client.submit(script, [str(gate)], cwd=str(tmp_path)) for _ in range(3)]
    wait_for(lambda: all(_running(client, job) for job in jobs), 180, "all three running")
    gate.touch()
    apps = set()
    for job in jobs:
        result = wait_result(client, job)
        assert result.status is JobStatus.FINISHED, _why(result)
        printed = "".join(Path(path).read_text() for path in result.stdout_paths)
        assert "rows 1000" in printed and "marker everywhere" in printed, printed
        apps.update(re.findall(r"app (\S+)", printed))
    assert len(apps) == 2, f"the scripts ran on {apps} only"


def test_a_partition_file_deleted_under_a_running_job_is_recomputed(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """One data file of each partition of a finished producer is deleted on its machine
    before its consumers start: they fail naming the partition, failover runs the
    producer again, then them, and the count is exact."""
    local, taskmanagers = cluster
    source, expected = words_file(tmp_path, lines=2000, extra="__hold__")
    job_file, gate = tmp_path / "held.py", tmp_path / "gate"
    job_file.write_text(HELD_COUNT, encoding="utf-8")
    job_id = client.submit(job_file, [source.as_uri(), str(gate)], restart_strategy=RESTARTS)
    work_dir = local.cluster_dir / "work" / job_id
    attempt_id, taskmanager, files = wait_for(
        lambda: _finished_partitions(client, job_id, taskmanagers, work_dir), 180,
        "all sum subtasks but the held one finished, one with data files")
    for file in files:
        taskmanager.sees(file).unlink()
    gate.touch()
    result = wait_result(client, job_id)
    assert result.status is JobStatus.FINISHED, _why(result)
    assert {word: count for word, count in collected_rows(result)} == dict(expected)
    failures = client.failure_history(job_id)
    named = [f for f in failures if f["exception_type"] == "PartitionNotFound"
             and attempt_id in f["lost_producers"]
             and any(f"at {file.parent}, written by" in f["message"]
                     and file.name in f["message"] for file in files)]
    assert named, (files, failures)
    held = _vertex(client, job_id, "sum")
    assert any(attempt_id in [a.attempt_id for a in s.attempts[:-1]]
               for s in held.subtasks), f"{attempt_id} did not run again"


def test_kill_9_of_a_taskmanager_whose_partitions_are_needed_reruns_its_producers(
        cluster, client, tmp_path) -> None:
    _, taskmanagers = cluster
    source, expected = words_file(tmp_path, lines=2000)
    job_file, gate = tmp_path / "gated.py", tmp_path / "gate"
    job_file.write_text(GATED_COUNT, encoding="utf-8")
    job_id = client.submit(job_file, [source.as_uri(), str(gate)], restart_strategy=RESTARTS)
    producers, consumers = wait_for(lambda: _consumers_waiting(client, job_id), 180,
                                    "every producer finished, every consumer running")
    # Four consumers run at once in four slots: two on each TaskManager.
    victim = next(t for t in taskmanagers if t.id in set(producers.values()) & consumers)
    victim.kill()
    gate.touch()
    result = wait_result(client, job_id)
    assert result.status is JobStatus.FINISHED, _why(result)
    assert {word: count for word, count in collected_rows(result)} == dict(expected)
    causes = [f.get("exception_type") for f in client.failure_history(job_id)]
    assert "TaskManagerLost" in causes, causes
    source = _source(client, job_id)
    rerun = {s.subtask for s in source.subtasks if len(s.attempts) > 1}
    lost = {subtask for subtask, host in producers.items() if host == victim.id}
    assert lost <= rerun, f"producers {lost} ran on {victim.id}; re-run: {rerun}"


def test_a_taskmanager_that_may_not_create_the_jobmanagers_paths_still_runs_tasks(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """Runs last: the module's TaskManagers go, so that only this one has slots."""
    local, taskmanagers = cluster
    for taskmanager in taskmanagers:
        taskmanager.kill()
    watcher = ClusterWatcher(local.config)
    try:
        wait_for(lambda: watcher.latest is not None and not watcher.registered(), 30,
                 "the module's TaskManagers lost")
        with namespaced_taskmanagers(local, 1, tmp_path, TASKMANAGER_CONFIG,
                                     writable_elsewhere=False) as (restricted,):
            watcher.wait_registered([restricted.id], timeout=60)
            source, expected = words_file(tmp_path, lines=500)
            result = wait_result(client, client.submit(
                EXAMPLES / "wordcount.py", [source.as_uri(), "2"],
                restart_strategy={"restart-strategy.type": "none"}))
            assert result.status is JobStatus.FINISHED, _why(result)
            assert dict(collected_rows(result)) == dict(expected)
    finally:
        watcher.close()


def _finished_partitions(client: JobClient, job_id: str,
                         taskmanagers: list[NamespacedTaskManager], work_dir: Path
                         ) -> tuple[str, NamespacedTaskManager, list[Path]] | None:
    """While exactly one sum subtask runs: a finished one that wrote data, its
    TaskManager and one data file of each of its partitions (paths as on that machine)."""
    snapshot = client.snapshot(job_id)
    if snapshot is None:
        return None
    vertex = _named(snapshot, "sum")
    states = [s.state for s in vertex.subtasks]
    if states.count(ExecutionState.RUNNING) != 1 or \
            states.count(ExecutionState.FINISHED) != len(states) - 1:
        return None
    where = {t.id: t for t in taskmanagers}
    for subtask in vertex.subtasks:
        attempt = subtask.attempts[-1]
        taskmanager = where.get(_host(attempt))
        if subtask.state is not ExecutionState.FINISHED or taskmanager is None:
            continue
        folder = work_dir / "partitions" / attempt_file_stem(attempt.attempt_id)
        seen = taskmanager.sees(folder)
        partitions = sorted(seen.glob("*/__part=*"))
        files = [next(iter(sorted(p.glob("*.parquet"))), None) for p in partitions]
        if any(files):
            return attempt.attempt_id, taskmanager, [
                folder / file.relative_to(seen) for file in files if file is not None]
    return None


def _running(client: JobClient, job_id: str) -> bool:
    snapshot = client.snapshot(job_id, timeout=1.0)
    return snapshot is not None and all(
        s.state is ExecutionState.RUNNING for v in snapshot.graph.vertices for s in v.subtasks)


def _consumers_waiting(client: JobClient, job_id: str
                       ) -> tuple[dict[int, str], set[str]] | None:
    """Once every producer finished and every consumer runs (at the gate): producer
    subtask -> its TaskManager, and the TaskManagers running consumers; else None."""
    snapshot = client.snapshot(job_id)
    if snapshot is None:
        return None
    source, consumer = snapshot.graph.vertices  # GATED_COUNT has two vertices
    if any(s.state is not ExecutionState.FINISHED for s in source.subtasks) or \
            any(s.state is not ExecutionState.RUNNING for s in consumer.subtasks):
        return None
    producers = {s.subtask: _host(s.attempts[-1]) for s in source.subtasks}
    return producers, {_host(s.attempts[-1]) for s in consumer.subtasks}


def _source(client: JobClient, job_id: str) -> VertexSnapshot:
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    return next(v for v in snapshot.graph.vertices if v.is_source)


def _vertex(client: JobClient, job_id: str, operator: str) -> VertexSnapshot:
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    return _named(snapshot, operator)


def _named(snapshot: p.JobSnapshot, operator: str) -> VertexSnapshot:
    """The vertex whose chain starts with an operator named ``operator``."""
    return next(v for v in snapshot.graph.vertices if v.name.split(" -> ")[0] == operator)


def _why(result: p.JobResult) -> str:
    cause = result.root_cause or {}
    return f"{cause.get('exception_type')}: {cause.get('message')}"


def _host(attempt: AttemptSnapshot) -> str:
    return attempt.slot.taskmanager_id if attempt.slot else ""
