"""Streaming sources and sinks on a real cluster (docs/streaming.md): a watched folder's
files, dropped while the job runs, into the two-phase file sink, every line committed once
even with a TaskManager killed mid-stream; and a print sink's lines in the job's printed
output."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, wait_result
from tests.integration.test_failover import described, pid_of, running_on
from tests.integration.test_streaming import committed
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster(SPARK_UP_AND_RESTARTS)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "streaming_folder.py"


def drop_files(folder: Path, first: int, count: int, lines: int) -> list[str]:
    """Files ``f<first>.txt`` ... written under a hidden name and renamed, as a writer into
    a watched folder should; what examples/streaming_folder.py writes for them."""
    expected = []
    for n in range(first, first + count):
        hidden = folder / f".f{n}.txt"
        hidden.write_text("".join(f"file-{n} line-{i}\n" for i in range(lines))
                          + "# a comment\n\n")
        hidden.rename(folder / f"f{n}.txt")
        expected += [f"FILE-{n} LINE-{i}" for i in range(lines)]
    return expected


def test_a_watched_folder_with_a_taskmanager_killed_mid_stream_gives_each_line_once(
        client, cluster, tmp_path) -> None:
    """Files dropped while the job runs, before and after a kill -9 of a TaskManager
    running a subtask: the subtask resumes elsewhere at its file and offset of the last
    completed checkpoint, and the committed output holds every line once."""
    local_cluster, _ = cluster
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    expected = drop_files(inbox, 0, 8, 2000)
    job_id = client.submit(EXAMPLE, (str(inbox), str(out), "6"))
    wait_for(lambda: committed(out), 60, "committed output")
    expected += drop_files(inbox, 8, 8, 200)
    victim = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and running_on(
        "folder_source", s.graph), 60, "a subtask running")
    os.kill(pid_of(local_cluster, victim), signal.SIGKILL)
    expected += drop_files(inbox, 16, 8, 200)
    result = wait_result(client, job_id, 180)
    assert result.status == JobStatus.FINISHED, described(result)
    assert any(f["taskmanager_id"] == victim for f in result.failure_history), \
        described(result)
    assert committed(out) == sorted(expected)
    wait_for(lambda: local_cluster.supervisor.info(victim).pid, 60, f"{victim} restarted")


def test_a_print_sink_puts_every_line_in_the_jobs_printed_output(client, tmp_path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    expected = drop_files(inbox, 0, 4, 50)
    job_id = client.submit(EXAMPLE, (str(inbox), "-", "2"))
    result = wait_result(client, job_id, 120)
    assert result.status == JobStatus.FINISHED, described(result)
    printed = [line for path in result.stdout_paths
               for line in Path(path).read_text().splitlines()]
    assert sorted(line.split("> ", 1)[1] for line in printed) == sorted(expected)
    assert {line.split(">")[0] for line in printed} == {"1", "2"}
