"""Streaming jobs on a real cluster whose TaskManagers keep keyed state in the rocksdb state
backend (``state.backend = "rocksdb"``) with a memory budget of 256 KiB a subtask: state
several times that runs, checkpoints incrementally and restores exactly after kill -9 of
a TaskManager; the keyed window count and a savepoint's stop and resume give the heap
backend's output."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import pytest

from clusterdeck.core.config import paths
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, wait_result
from tests.integration.test_failover import described, pid_of
from tests.integration.test_streaming import (
    STATE,
    WINDOWS,
    committed,
    in_progress,
    kill_taskmanager_running,
    state_expected,
    windows_expected,
)
from tests.waiting import wait_for

BUDGET = 256 * 1024
pytestmark = [pytest.mark.integration, pytest.mark.cluster(
    {**SPARK_UP_AND_RESTARTS, "state.backend": "rocksdb", "state.backend.memory": BUDGET})]

RUN = 5
PADDING = 200
LARGE_STATE_JOB = f'''
"""Per user, a run of {RUN} records' indices summed, with {PADDING} bytes of state each."""

def every_fifth(record, state):
    index, user = record
    rounds, seen, total, padding = state.value() or (0, 0, 0, "x" * {PADDING})
    seen, total = seen + 1, total + index
    if seen < {RUN}:
        state.update((rounds, seen, total, padding))
        return None
    state.update((rounds + 1, 0, 0, padding))
    return [f"{{user}},{{rounds}},{{total}}"]


def build(env):
    out, count, rate, users = env.args[0], int(env.args[1]), float(env.args[2]), \\
        int(env.args[3])
    env.set_job_name("large keyed state").set_parallelism(2)
    env.enable_checkpointing(0.5)
    (env.rate_source(rate, count)
        .map(lambda record: (record[0], f"user-{{record[0] % users}}"))
        .key_by(1)
        .process(every_fifth, name="every fifth per user")
        .write_text(out))
'''


def large_expected(count: int, users: int) -> list[str]:
    lines = []
    for user in range(users):
        indices = list(range(user, count, users))
        lines += [f"user-{user},{run},{sum(indices[run * RUN:run * RUN + RUN])}"
                  for run in range(len(indices) // RUN)]
    return sorted(lines)


def shared_files(cluster_id: str) -> dict[Path, int]:
    """Every shared state file of the cluster's checkpoints, with its size."""
    return {path: path.stat().st_size
            for path in paths.cluster_dir(cluster_id).rglob("shared/*/*")
            if path.suffix in (".delta", ".base") and path.is_file()}


@pytest.mark.timeout(400)  # 20 s of input, a failover, and process state in two Spark jobs
def test_state_larger_than_the_memory_budget_restores_exactly_after_a_taskmanager_is_killed(
        client, cluster, tmp_path) -> None:
    """4,000 users of ~230 bytes of state each (about 450 KiB a subtask, against its
    256 KiB budget); kill -9 of a TaskManager running the process function while a
    checkpoint is in progress: the committed output is the undisturbed run's, once each,
    and the checkpoints were incremental (deltas after the first) and larger in all
    than the budget."""
    local_cluster, _ = cluster
    job = tmp_path / "large_state.py"
    job.write_text(textwrap.dedent(LARGE_STATE_JOB))
    out = tmp_path / "out"
    count, users = 40_000, 4_000
    job_id = client.submit(job, (str(out), str(count), "2000", str(users)))
    cluster_id = str(local_cluster.config["cluster.id"])
    wait_for(lambda: sum(shared_files(cluster_id).values()) > 2 * BUDGET, 120,
             "keyed state beyond the budget checkpointed")
    wait_for(lambda: in_progress(client, job_id), 30, "a checkpoint in progress")
    kill_taskmanager_running(local_cluster, client, job_id, "every fifth per user")
    result = wait_result(client, job_id, 300)
    assert result.status == JobStatus.FINISHED, described(result)
    assert result.failure_history, "the kill failed no attempt"
    assert committed(out) == large_expected(count, users)
    deltas = [path for path in shared_files(cluster_id) if path.suffix == ".delta"]
    assert deltas, "no incremental checkpoint was taken"


def test_a_keyed_window_count_in_rocksdb_is_exact_across_a_killed_taskmanager(
        client, cluster, tmp_path) -> None:
    local_cluster, _ = cluster
    out = tmp_path / "out"
    job_id = client.submit(WINDOWS, (str(out), "6000", "500", "2"))
    wait_for(lambda: len(committed(out)) >= 20, 90, "some windows committed")
    wait_for(lambda: in_progress(client, job_id), 30, "a checkpoint in progress")
    victim = kill_taskmanager_running(local_cluster, client, job_id, "count per second")
    result = wait_result(client, job_id, 240)
    assert result.status == JobStatus.FINISHED, described(result)
    assert committed(out) == windows_expected(6000)
    wait_for(lambda: local_cluster.supervisor.info(victim).pid, 60, f"{victim} restarted")


def test_a_savepoint_of_rocksdb_state_is_self_contained_and_resumes_exactly(
        client, tmp_path) -> None:
    from clusterdeck.core.protocol.checkpoints import SavepointRestore
    out = tmp_path / "out"
    job_id = client.submit(STATE, (str(out), "6000", "250"))
    wait_for(lambda: len(committed(out)) > 30, 60, "a few checkpoints committed")
    stopped = client.savepoint(job_id, stop=True, timeout=60)
    result = wait_result(client, job_id, 60)
    assert result.status == JobStatus.FINISHED, described(result)
    metadata = json.loads((Path(stopped.path) / "_metadata").read_text())
    shared = [file["path"] for state in metadata["states"].values()
              for file in state["shared"]]
    assert shared and all((Path(stopped.path) / name).is_file() for name in shared)
    resumed = client.submit(STATE, (str(out), "6000", "250"),
                            savepoint=SavepointRestore(stopped.path))
    result = wait_result(client, resumed, 120)
    assert result.status == JobStatus.FINISHED, described(result)
    assert committed(out) == state_expected(6000)


def test_a_killed_jobmanager_resumes_rocksdb_windows_from_the_shared_files_on_disk(
        client, cluster, tmp_path) -> None:
    """kill -9 of the JobManager mid-stream: the next one rebuilds its checkpoint store
    and shared-state registry from the metadata on disk, keeps every file the last
    checkpoint names (its sweep deletes none of them), and the output is exact."""
    local_cluster, _ = cluster
    out = tmp_path / "out"
    job_id = client.submit(WINDOWS, (str(out), "6000", "500", "2"))
    wait_for(lambda: len(committed(out)) >= 20, 90, "some windows committed")
    old_pid = pid_of(local_cluster, "jobmanager")
    os.kill(old_pid, signal.SIGKILL)
    result = wait_result(client, job_id, 240)
    assert local_cluster.supervisor.info("jobmanager").pid != old_pid
    assert result.status == JobStatus.FINISHED, described(result)
    assert committed(out) == windows_expected(6000)
    assert client.snapshot(job_id).graph.epoch >= 1
