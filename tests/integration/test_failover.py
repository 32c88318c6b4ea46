"""Failures on a real cluster: processes killed, hung or cut off in the middle of a job.

Every job here must still finish with exactly the right result, and the failure history
must say what was lost. One cluster serves the module; each test leaves it whole.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
from collections import Counter
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import collected_rows
from clusterdeck.core.config import paths
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.protocol.workdir import partitions_dir
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, wait_result
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration,
              pytest.mark.cluster({**SPARK_UP_AND_RESTARTS, "job.split-size": "4 KiB"})]
BOTH = ["taskmanager-1", "taskmanager-2"]

SLOW_WORDCOUNT = '''
import re
import time

def tokenize(line):
    time.sleep({delay})
    return re.findall(r"[a-z]+", line)

def build(env):
    env.set_parallelism(2)
    lines = env.counter("lines")
    (env.read_text(env.args[0], name="lines")
        .filter(lambda line: lines.add(1) or True, name="count lines")
        .flat_map(tokenize, name="tokenize")
        .map(lambda word: (word, 1), name="pair")
        .key_by(0)
        .reduce(lambda a, b: (a[0], a[1] + b[1]), name="count")
        .map(lambda pair: time.sleep({consumer_delay}) or pair, name="slow")
        .collect(name="counts"))
'''


def running_on(vertex_name_part: str, snapshot: JobGraphSnapshot) -> str | None:
    """A TaskManager running a subtask of the vertex whose name contains the part, from the
    job's retained snapshot (events may have passed before a test subscribed)."""
    for vertex in snapshot.vertices:
        if vertex_name_part not in vertex.name:
            continue
        for subtask in vertex.subtasks:
            current = subtask.attempts[-1]
            if current.state is ExecutionState.RUNNING and current.slot:
                return current.slot.taskmanager_id
    return None


def input_files(folder: Path, files: int = 8, lines: int = 60) -> Counter:
    folder.mkdir(parents=True, exist_ok=True)
    expected: Counter = Counter()
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    for index in range(files):
        rows = [" ".join(words[(index + line + k) % len(words)] for k in range(1 + line % 5))
                for line in range(lines)]
        (folder / f"part-{index}.txt").write_text("\n".join(rows) + "\n")
        for row in rows:
            expected.update(re.findall(r"[a-z]+", row))
    return expected


def slow_job(tmp_path: Path, delay: float, consumer_delay: float = 0.0) -> Path:
    job = tmp_path / "slow_wordcount.py"
    job.write_text(SLOW_WORDCOUNT.format(delay=delay, consumer_delay=consumer_delay))
    return job


def described(result: p.JobResult) -> str:
    return "\n".join(f"{f['attempt_id']} on {f['taskmanager_id']}: {f['exception_type']}: "
                     f"{f['message']}" for f in result.failure_history)


def pid_of(local_cluster, name: str) -> int:
    return wait_for(lambda: local_cluster.supervisor.info(name).pid, 30, f"{name} running")


def kill_a_taskmanager_running(client, cluster, job_id, vertex_part, sig=signal.SIGKILL):
    local_cluster, _ = cluster
    victim = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and running_on(
        vertex_part, s.graph), 120, f"a subtask of {vertex_part} running")
    pid = pid_of(local_cluster, victim)
    os.kill(pid, sig)
    return victim, pid


@pytest.mark.parametrize("stage", ["tokenize", "count"])
def test_a_taskmanager_killed_in_the_middle_of_a_word_count_loses_nothing(
        client, cluster, tmp_path, stage) -> None:
    _, watcher = cluster
    watcher.wait_registered(BOTH, timeout=120)
    expected = input_files(tmp_path / "in")
    job_id = client.submit(slow_job(tmp_path, 0.02), [str(tmp_path / "in")])
    victim, _ = kill_a_taskmanager_running(client, cluster, job_id, stage)
    result = wait_result(client, job_id)
    assert result.status == JobStatus.FINISHED, described(result)
    assert Counter(dict(collected_rows(result))) == expected
    lost = [f for f in result.failure_history if f["exception_type"] == "TaskManagerLost"]
    assert lost and all(victim in f["message"] for f in lost)
    watcher.wait_registered(BOTH, timeout=120)


def test_a_hung_taskmanager_is_detected_and_its_work_runs_elsewhere(
        client, cluster, tmp_path) -> None:
    _, watcher = cluster
    watcher.wait_registered(BOTH, timeout=120)
    expected = input_files(tmp_path / "in")
    job_id = client.submit(slow_job(tmp_path, 0.02), [str(tmp_path / "in")])
    victim, pid = kill_a_taskmanager_running(client, cluster, job_id, "tokenize",
                                             signal.SIGSTOP)
    try:
        wait_for(lambda: (t := watcher.taskmanager(victim))
                 and t.state is p.TaskManagerState.LOST, 30, f"{victim} lost")
        result = wait_result(client, job_id)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert result.status == JobStatus.FINISHED, described(result)
    assert Counter(dict(collected_rows(result))) == expected
    assert any("no heartbeat" in f["message"] for f in result.failure_history)
    watcher.wait_registered(BOTH, timeout=60)  # the same process registers again
    assert watcher.taskmanager(victim).pid == pid


def test_a_killed_broker_in_the_middle_of_a_job_loses_nothing(client, cluster, tmp_path) -> None:
    local_cluster, watcher = cluster
    watcher.wait_registered(BOTH, timeout=120)
    expected = input_files(tmp_path / "in")
    job_id = client.submit(slow_job(tmp_path, 0.02), [str(tmp_path / "in")])
    wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and s.graph.progress.total and
             s.graph.status is JobStatus.RUNNING, 60, "the job running")
    os.kill(pid_of(local_cluster, "broker"), signal.SIGKILL)
    result = wait_result(client, job_id)
    assert result.status == JobStatus.FINISHED, described(result)
    assert Counter(dict(collected_rows(result))) == expected


def test_a_user_exception_fails_the_job_after_the_configured_attempts(client, tmp_path) -> None:
    job = tmp_path / "bad.py"
    job.write_text("def check(x):\n"
                   "    if x == 13:\n"
                   "        raise KeyError(f'no such record: {x}')\n"
                   "    return x\n"
                   "def build(env):\n"
                   "    env.set_parallelism(2)\n"
                   "    env.from_range(0, 20, name='numbers').map(check, name='check')"
                   ".collect(name='out')\n")
    job_id = client.submit(job, [], restart_strategy={"restart-strategy.type": "fixed-delay",
                                                      "restart-strategy.fixed-delay.attempts": 2,
                                                      "restart-strategy.fixed-delay.delay": 0.5})
    result = wait_result(client, job_id)
    assert result.status == JobStatus.FAILED
    assert result.failures == 3  # the first run and two restarts
    cause = result.root_cause
    assert cause["exception_type"] == "KeyError"
    assert "no such record: 13" in cause["message"]
    assert "raise KeyError" in cause["traceback"]
    assert 1 in cause["input_splits"]  # record 13 is in the second half of the range
    snapshot = client.snapshot(job_id)
    names = {v.id: v.name for v in snapshot.graph.vertices}
    assert "check" in names[cause["vertex_id"]]
    times = sorted(f["timestamp"] for f in result.failure_history)
    assert all(later - earlier >= 0.5 for earlier, later in itertools.pairwise(times))


def test_with_no_restart_strategy_the_first_failure_fails_the_job(client, tmp_path) -> None:
    job = tmp_path / "bad_once.py"
    job.write_text("def boom(x):\n    raise RuntimeError('boom')\n"
                   "def build(env):\n    env.from_collection([1]).map(boom).collect()\n")
    job_id = client.submit(job, [], restart_strategy={"restart-strategy.type": "none"})
    result = wait_result(client, job_id)
    assert result.status == JobStatus.FAILED and result.failures == 1


def test_a_killed_jobmanager_recovers_the_job_and_keeps_what_had_finished(
        client, cluster, tmp_path) -> None:
    local_cluster, watcher = cluster
    watcher.wait_registered(BOTH, timeout=120)
    expected = input_files(tmp_path / "in")
    job_id = client.submit(slow_job(tmp_path, 0.0, consumer_delay=0.1),
                           [str(tmp_path / "in")])
    snapshot = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and running_on(
        "slow", s.graph) and s, 120, "the consumer stage running")
    (source,) = [v for v in snapshot.graph.vertices if "lines" in v.name]
    finished_before = {(source.id, s.subtask): s.attempt_id
                       for s in source.subtasks if s.state is ExecutionState.FINISHED}
    assert len(finished_before) == source.parallelism
    old_pid = pid_of(local_cluster, "jobmanager")
    os.kill(old_pid, signal.SIGKILL)
    result = wait_result(client, job_id)
    assert local_cluster.supervisor.info("jobmanager").pid != old_pid
    assert result.status == JobStatus.FINISHED, described(result)
    assert Counter(dict(collected_rows(result))) == expected
    assert result.accumulators["lines"] == sum(1 for _ in (tmp_path / "in").glob("*")) * 60
    final = client.snapshot(job_id).graph
    assert final.epoch >= 1
    for vertex in final.vertices:
        for subtask in vertex.subtasks:
            key = (vertex.id, subtask.subtask)
            if key in finished_before:  # not run again: the same attempt is still current
                assert subtask.attempt_id == finished_before[key]


def test_a_stuck_task_is_cancelled_then_interrupted_after_its_timeout(client, tmp_path) -> None:
    script = tmp_path / "stuck.py"
    script.write_text("import time\n"
                      "from pyspark.sql import SparkSession\n"
                      "if __name__ == '__main__':\n"
                      "    spark = SparkSession.builder.getOrCreate()\n"
                      "    while True:  # no Spark job to cancel: only an interrupt ends it\n"
                      "        time.sleep(0.05)\n")
    job_id = client.submit(script, [], restart_strategy={"restart-strategy.type": "none"},
                           task_timeout=2.0)
    result = wait_result(client, job_id, timeout=120)
    assert result.status == JobStatus.FAILED
    assert result.root_cause["exception_type"] == "TaskTimeoutError"
    assert "timeout of 2 s" in result.root_cause["message"]


GATED_SUMS = '''
import os
import time

def gated(x):
    # The records of one half wait for the test's gate file, so one producer subtask
    # finishes while the other still runs, and no consumer starts before the gate opens.
    if x >= 10:
        deadline = time.monotonic() + 120
        while not os.path.exists({gate!r}) and time.monotonic() < deadline:
            time.sleep(0.02)
    return (x % 3, x)

def build(env):
    env.set_parallelism(2)
    (env.from_range(0, 20, name="numbers").map(gated, name="gated")
        .key_by(0).sum(1, name="sums").collect(name="out"))
'''


def finished_producer(snapshot: JobGraphSnapshot) -> str | None:
    """The attempt id of a finished subtask of the gated vertex while another still runs."""
    (vertex,) = [v for v in snapshot.vertices if "gated" in v.name]
    states = [s.state for s in vertex.subtasks]
    if ExecutionState.RUNNING not in states:
        return None
    return next((s.attempt_id for s in vertex.subtasks if s.state is ExecutionState.FINISHED),
                None)


def test_a_producers_deleted_partitions_are_produced_again_before_the_consumer_reads(
        client, cluster, tmp_path) -> None:
    local_cluster, _ = cluster
    gate = tmp_path / "gate"
    job = tmp_path / "gated_sums.py"
    job.write_text(GATED_SUMS.format(gate=str(gate)))
    job_id = client.submit(job, [])
    producer = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and finished_producer(
        s.graph), 120, "one producer subtask finished while the other waits at the gate")
    written = partitions_dir(str(paths.cluster_dir(local_cluster.cluster_id) / "work" / job_id),
                             producer)
    assert list(written.rglob("_complete.json")), f"no completed partitions in {written}"
    shutil.rmtree(written)  # as if the producer had run where the consumers cannot see
    gate.touch()

    result = wait_result(client, job_id)

    assert result.status == JobStatus.FINISHED, described(result)
    assert sorted(tuple(row) for row in collected_rows(result)) == [
        (k, sum(x for x in range(20) if x % 3 == k)) for k in range(3)]
    not_found = [f for f in result.failure_history if f["exception_type"] == "PartitionNotFound"]
    assert not_found, described(result)
    assert all(f["lost_producers"] == [producer] and producer in f["message"]
               and str(written) in f["message"] for f in not_found)
    final = client.snapshot(job_id).graph
    (vertex,) = [v for v in final.vertices if "gated" in v.name]
    rerun = next(s for s in vertex.subtasks if s.attempts[0].attempt_id == producer)
    assert len(rerun.attempts) == 2 and rerun.attempts[0].partitions_lost
