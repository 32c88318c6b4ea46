"""TaskManagers that share nothing with the JobManager but the broker (issue 13).

Every TaskManager runs in its own mount namespace (tests/integration/namespaces.py): the
JobManager's folders and the other TaskManagers' are out of its sight, so result
partitions cross over the TaskManagers' data services, and collected rows and printed
output reach the client through the JobManager. Real broker, real processes, real Spark.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from tests.integration.clusters import FAST_HEARTBEATS, running_cluster, wait_result
from tests.integration.namespaces import (
    NamespacedTaskManager,
    namespaced_taskmanagers,
    skip_unless_namespaces,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
TASKMANAGER_CONFIG = {**FAST_HEARTBEATS, "taskmanager.slots": 2}
SETTING = {"spark.clusterdeck.test-marker": "everywhere"}

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[LocalCluster, list[NamespacedTaskManager]]]:
    """A JobManager with no TaskManager of its own, and two in namespaces of their own;
    the cluster's Spark setting is in the JobManager's configuration only."""
    skip_unless_namespaces()
    folder = tmp_path_factory.mktemp("namespaced")
    with running_cluster("auto", **{"taskmanager.count": 0, **SETTING}) as (local, watcher), \
            namespaced_taskmanagers(local, 2, folder, TASKMANAGER_CONFIG) as taskmanagers:
        ids = [t.id for t in taskmanagers]
        try:
            watcher.wait_registered(ids, timeout=90)
        except AssertionError:
            raise AssertionError("\n".join(t.output() for t in taskmanagers)) from None
        yield local, taskmanagers


@pytest.fixture
def client(cluster: tuple[LocalCluster, list[NamespacedTaskManager]]) -> Iterator[JobClient]:
    with JobClient(cluster[0].config, connect_timeout=30) as connected:
        yield connected


def words_file(folder: Path, lines: int = 4000) -> tuple[Path, collections.Counter[str]]:
    path = folder / "words.txt"
    rows = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(i % 9 + 1))
            for i in range(lines)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path, collections.Counter(word for row in rows for word in row.split())


def test_the_taskmanagers_see_none_of_the_jobmanagers_folders(cluster) -> None:
    local, taskmanagers = cluster
    assert (local.cluster_dir / "credentials.json").exists()
    for taskmanager in taskmanagers:  # unshare and sh exec: the pid is the TaskManager's
        root = Path(f"/proc/{taskmanager.process.pid}/root")
        assert (root / str(EXAMPLES).lstrip("/")).is_dir()  # the view is there...
        assert not (root / str(local.cluster_dir).lstrip("/") / "credentials.json").exists()


def test_a_word_count_over_taskmanagers_sharing_no_folder_is_exact(client, tmp_path) -> None:
    source, expected = words_file(tmp_path)
    result = wait_result(client, client.submit(EXAMPLES / "wordcount.py", [str(source), "4"]))
    assert result.status is JobStatus.FINISHED, result.root_cause
    assert {word: count for word, count in collected_rows(result)} == dict(expected)


def test_an_input_named_by_a_url_is_read_by_any_taskmanager(client, tmp_path) -> None:
    """file:// names a shared mount: its split is bound to no host, Spark reads it."""
    source, expected = words_file(tmp_path, lines=500)
    result = wait_result(client, client.submit(EXAMPLES / "wordcount.py",
                                               [f"file://{source}", "2"]))
    assert result.status is JobStatus.FINISHED, result.root_cause
    assert {word: count for word, count in collected_rows(result)} == dict(expected)


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
        assert result.status is JobStatus.FINISHED, result.root_cause
        printed = "".join(Path(path).read_text() for path in result.stdout_paths)
        assert "rows 1000" in printed and "marker everywhere" in printed, printed
        apps.update(re.findall(r"app (\S+)", printed))
    assert len(apps) == 2, f"the scripts ran on {apps} only"


def _running(client: JobClient, job_id: str) -> bool:
    snapshot = client.snapshot(job_id, timeout=1.0)
    return snapshot is not None and all(
        s.state is ExecutionState.RUNNING for v in snapshot.graph.vertices for s in v.subtasks)


def test_kill_9_of_a_taskmanager_whose_partitions_are_needed_reruns_its_producers(
        cluster, client, tmp_path) -> None:
    _, taskmanagers = cluster
    source, expected = words_file(tmp_path, lines=2000)
    job_file, gate = tmp_path / "gated.py", tmp_path / "gate"
    job_file.write_text(GATED_COUNT, encoding="utf-8")
    job_id = client.submit(job_file, [str(source), str(gate)], restart_strategy={
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 5,
        "restart-strategy.fixed-delay.delay": 0.2})
    producers = wait_for(lambda: _producers_finished(client, job_id), 180,
                         "every producer finished")
    victim = next(t for t in taskmanagers if t.id in producers.values())
    victim.kill()
    gate.touch()
    result = wait_result(client, job_id)
    assert result.status is JobStatus.FINISHED, result.root_cause
    assert {word: count for word, count in collected_rows(result)} == dict(expected)
    causes = [f.get("exception_type") for f in client.failure_history(job_id)]
    assert "TaskManagerLost" in causes, causes
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    source = next(v for v in snapshot.graph.vertices if v.is_source)
    rerun = {s.subtask for s in source.subtasks if len(s.attempts) > 1}
    lost = {subtask for subtask, host in producers.items() if host == victim.id}
    assert lost <= rerun, f"producers {lost} ran on {victim.id}; re-run: {rerun}"


def _producers_finished(client: JobClient, job_id: str) -> dict[int, str] | None:
    """Producer subtask -> its TaskManager, once all four finished; else None."""
    snapshot = client.snapshot(job_id)
    if snapshot is None:
        return None
    source = next(v for v in snapshot.graph.vertices if v.is_source)
    done = {s.subtask: a.slot.taskmanager_id for s in source.subtasks for a in s.attempts
            if a.attempt_id == s.attempt_id and a.state is ExecutionState.FINISHED and a.slot}
    return done if len(done) == source.parallelism else None
