"""Streaming jobs on a real cluster (docs/streaming.md): a rate generator's records through
Spark into a two-phase file sink, with checkpoints; the committed output is exactly the
records the job should write, once each, even with a TaskManager killed mid-stream."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import running_cluster, wait_result
from tests.integration.test_failover import described, pid_of, running_on
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "streaming_rate.py"


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("auto", **{"spark.start": "eager",
                                    "restart-strategy.fixed-delay.delay": 0.2,
                                    "restart-strategy.fixed-delay.attempts": 5}) as running:
        yield running


@pytest.fixture(scope="module")
def client(cluster):
    local_cluster, _ = cluster
    with JobClient(local_cluster.config, connect_timeout=30) as job_client:
        yield job_client


def expected(count: int) -> list[str]:
    """What examples/streaming_rate.py writes for ``count`` records."""
    return sorted(f"{i},key-{i % 10}" for i in range(count) if i % 7 != 3)


def committed(folder: Path) -> list[str]:
    """The sink's output: its ``part-`` files (work in progress is hidden)."""
    if not folder.is_dir():
        return []
    return sorted(line for path in folder.iterdir() if path.name.startswith("part-")
                  for line in path.read_text().splitlines())


def test_a_streaming_job_commits_its_output_with_its_checkpoints_exactly_once(
        client, tmp_path) -> None:
    out = tmp_path / "out"
    job_id = client.submit(EXAMPLE, (str(out), "3000", "500"))
    # output appears as checkpoints complete, while the job still runs
    wait_for(lambda: committed(out) and client.snapshot(job_id, 1.0).graph.status
             is JobStatus.RUNNING, 60, "committed output while the job runs")
    result = wait_result(client, job_id, 120)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert committed(out) == expected(3000)
    assert [path.name for path in out.iterdir() if not path.name.startswith("part-")] == []


def test_a_taskmanager_killed_mid_stream_loses_nothing_and_repeats_nothing(
        client, cluster, tmp_path) -> None:
    """kill -9 of a TaskManager running a subtask once some output is committed: the
    subtask resumes elsewhere from the last completed checkpoint, its uncommitted files
    dropped, and the committed output is the undisturbed run's."""
    local_cluster, _ = cluster
    out = tmp_path / "out"
    job_id = client.submit(EXAMPLE, (str(out), "8000", "500"))
    wait_for(lambda: len(committed(out)) > 500, 60, "a few checkpoints committed")
    victim = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and running_on(
        "rate_source", s.graph), 60, "a subtask running")
    os.kill(pid_of(local_cluster, victim), signal.SIGKILL)
    result = wait_result(client, job_id, 180)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert any(f["taskmanager_id"] == victim for f in result.failure_history), \
        described(result)
    assert committed(out) == expected(8000)
    wait_for(lambda: local_cluster.supervisor.info(victim).pid, 60, f"{victim} restarted")


def test_a_killed_jobmanager_resumes_the_stream_from_its_last_checkpoint(
        client, cluster, tmp_path) -> None:
    """kill -9 of the JobManager mid-stream: the next one resumes every subtask from the
    last completed checkpoint (the one whose metadata is on disk), the attempts of the
    old run stop, and the committed output is the undisturbed run's."""
    local_cluster, _ = cluster
    out = tmp_path / "out"
    job_id = client.submit(EXAMPLE, (str(out), "8000", "500"))
    wait_for(lambda: len(committed(out)) > 500, 60, "a few checkpoints committed")
    old_pid = pid_of(local_cluster, "jobmanager")
    os.kill(old_pid, signal.SIGKILL)
    result = wait_result(client, job_id, 240)
    assert local_cluster.supervisor.info("jobmanager").pid != old_pid
    assert result.status == JobStatus.FINISHED, described(result)
    assert committed(out) == expected(8000)
    assert client.snapshot(job_id).graph.epoch >= 1


def test_a_job_stopped_with_a_savepoint_goes_on_from_it_when_resubmitted(
        client, tmp_path) -> None:
    """A savepoint while the job runs, then ``stop --savepoint``: the job FINISHES with part
    of its output committed; the same job submitted from that savepoint writes the rest,
    and the output is the undisturbed run's, once each."""
    from clusterdeck.core.protocol.checkpoints import SavepointRestore
    from clusterdeck.core.rpc import RemoteError
    out = tmp_path / "out"
    job_id = client.submit(EXAMPLE, (str(out), "6000", "500"))
    wait_for(lambda: len(committed(out)) > 300, 60, "a few checkpoints committed")
    taken = client.savepoint(job_id, timeout=60)
    assert (Path(taken.path) / "_metadata").is_file()
    assert client.snapshot(job_id, 1.0).graph.status is JobStatus.RUNNING
    stopped = client.savepoint(job_id, stop=True, timeout=60)
    assert stopped.checkpoint_id > taken.checkpoint_id
    result = wait_result(client, job_id, 60)
    assert result.status == JobStatus.FINISHED, described(result)
    first = committed(out)
    assert first and len(first) < len(expected(6000)) and set(first) < set(expected(6000))
    with pytest.raises(RemoteError, match="savepoints are of running streaming jobs"):
        client.savepoint(job_id, timeout=10)

    resumed = client.submit(EXAMPLE, (str(out), "6000", "500"),
                            savepoint=SavepointRestore(stopped.path))
    result = wait_result(client, resumed, 120)
    assert result.status == JobStatus.FINISHED, described(result)
    assert committed(out) == expected(6000)
    read = sum(entry["in"] for entry in result.records.values())
    assert 0 < read < 6000  # it went on from the savepoint, not from the start


def test_a_job_is_refused_a_savepoint_that_is_not_one_of_its_cluster(client, tmp_path) -> None:
    from clusterdeck.core.protocol.checkpoints import SavepointRestore
    from clusterdeck.core.rpc import RemoteError
    with pytest.raises(RemoteError, match="is not a savepoint of this cluster"):
        client.submit(EXAMPLE, (str(tmp_path / "out"), "10", "500"),
                      savepoint=SavepointRestore(str(tmp_path)))
