"""Streaming jobs on a real cluster (docs/streaming.md): a rate generator's records through
Spark into a two-phase file sink, with checkpoints; the committed output is exactly the
records the job should write, once each, even with a TaskManager killed mid-stream."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from clusterdeck.core.protocol.causes import CauseKind, check_cause_chain
from clusterdeck.core.protocol.failures import TASKMANAGER_LOST
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.recorder.replay import recorded_runs
from clusterdeck.core.recorder.store import FILE_NAME
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, wait_result
from tests.integration.test_cluster_jobs import clusterdeck
from tests.integration.test_failover import described, pid_of, running_on
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster(SPARK_UP_AND_RESTARTS)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "streaming_rate.py"
WINDOWS = EXAMPLE.with_name("streaming_window.py")
BATCHES = EXAMPLE.with_name("streaming_batches.py")
COLUMNS = EXAMPLE.with_name("streaming_columns.py")
STATE = EXAMPLE.with_name("streaming_state.py")
TOTALS = EXAMPLE.with_name("streaming_totals.py")


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
    job_id = client.submit(EXAMPLE, (str(out), "2000", "500"))
    # output appears as checkpoints complete, while the job still runs
    wait_for(lambda: committed(out) and client.snapshot(job_id, 1.0).graph.status
             is JobStatus.RUNNING, 60, "committed output while the job runs")
    result = wait_result(client, job_id, 120)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert committed(out) == expected(2000)
    assert staged(out) == []


def kill_taskmanager_running(local_cluster, client, job_id: str, vertex_name: str) -> str:
    """kill -9 of a TaskManager running a subtask of the vertex; its id."""
    victim = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and running_on(
        vertex_name, s.graph), 30, f"a subtask of {vertex_name} running")
    os.kill(pid_of(local_cluster, victim), signal.SIGKILL)
    return victim


def windows_expected(count: int) -> list[str]:
    """What examples/streaming_window.py writes for ``count`` records (100 per second of
    event time, 10 per key): every key's count of every whole window."""
    return sorted(f"key-{k},{t},{t + 1},10" for k in range(10) for t in range(count // 100))


def in_progress(client, job_id: str) -> bool:
    snapshot = client.snapshot(job_id, 1.0)
    stats = snapshot.graph.checkpoints if snapshot else None
    return bool(stats and stats.in_progress)


def staged(folder: Path) -> list[str]:
    """The sink's work in progress: hidden files, not yet committed."""
    return [path.name for path in folder.iterdir() if not path.name.startswith("part-")] \
        if folder.is_dir() else []


def test_a_taskmanager_killed_before_the_first_checkpoint_starts_the_job_over(
        client, cluster, tmp_path) -> None:
    """The keyed window count, kill -9 while windows are written and no checkpoint has
    completed: there is nothing to resume from, so every subtask starts over (sources
    from their first record, windows empty) and what the killed attempts staged is never
    committed. The committed output is the undisturbed run's, each window once, and
    nothing is left in progress."""
    local_cluster, _ = cluster
    out = tmp_path / "out"
    job_id = client.submit(WINDOWS, (str(out), "3000", "500", "2", "exactly-once",
                                     "15"))  # checkpoints 15 s apart
    wait_for(lambda: staged(out), 60, "windows being written")
    assert client.snapshot(job_id, 1.0).graph.checkpoints.completed == 0
    victim = kill_taskmanager_running(local_cluster, client, job_id, "count per second")
    result = wait_result(client, job_id, 240)
    assert result.status == JobStatus.FINISHED, described(result)
    assert result.failure_history, "the kill failed no attempt"
    assert committed(out) == windows_expected(3000)
    assert staged(out) == []
    wait_for(lambda: local_cluster.supervisor.info(victim).pid, 60, f"{victim} restarted")


def test_a_keyed_window_count_loses_nothing_and_repeats_nothing_across_killed_taskmanagers(
        client, cluster, tmp_path) -> None:
    """Two vertices joined by a keyed exchange between TaskManagers (the source and its
    timestamps, then tumbling one-second counts per key into the file sink), the records
    as Arrow columns from the source to the window (streaming_columns.py); kill -9 of a
    TaskManager while a checkpoint is in progress, and once the job runs again, of one
    right after a checkpoint completed: every subtask resumes from the last completed
    checkpoint (windows, watermarks, positions), and the committed output is the
    undisturbed run's, each window's count once. Windows record by record resume after a
    killed TaskManager in the three-vertex and the at-least-once tests below, in
    test_streaming_rocksdb.py (killed while a checkpoint is in progress) and in
    test_distributed_streaming.py, and after a killed JobManager below."""
    local_cluster, _ = cluster
    out = tmp_path / "out"
    job_id = client.submit(COLUMNS, (str(out), "11000", "500", "2"))
    wait_for(lambda: len(committed(out)) >= 20, 90, "some windows committed")
    wait_for(lambda: in_progress(client, job_id), 30, "a checkpoint in progress")
    victim = kill_taskmanager_running(local_cluster, client, job_id, "count per second")
    wait_for(lambda: local_cluster.supervisor.info(victim).pid, 60, f"{victim} restarted")
    before = len(committed(out))
    wait_for(lambda: len(committed(out)) > before, 120, "output flowing again")
    completed = client.snapshot(job_id, 1.0).graph.checkpoints.completed
    wait_for(lambda: client.snapshot(job_id, 1.0).graph.checkpoints.completed > completed,
             30, "a checkpoint completing")
    assert client.snapshot(job_id, 1.0).graph.status is JobStatus.RUNNING
    # The one running the windows now: the restart may have put every subtask on the
    # restarted TaskManager, and killing an idle one fails nothing over.
    second = kill_taskmanager_running(local_cluster, client, job_id, "count per second")
    result = wait_result(client, job_id, 240)
    assert result.status == JobStatus.FINISHED, described(result)
    assert committed(out) == windows_expected(11000)
    # Two failovers at least. Each may be recorded as the lost TaskManager's subtasks'
    # failure or as their peers' (the connection to them closed), whichever came first.
    assert len(result.failure_history) >= 2, described(result)
    wait_for(lambda: local_cluster.supervisor.info(second).pid, 60, f"{second} restarted")


STALLING_JOB = '''
import os
import time

MARKER = {marker!r}
OUT = {out!r}


def stall_once(record):
    """Once a checkpoint committed output, the first attempt stalls for four seconds: the
    checkpoint triggered then stays in progress until the stall ends (its barrier waits
    behind this record)."""
    if not os.path.exists(MARKER) and os.path.isdir(OUT) and any(
            name.startswith("part-") for name in os.listdir(OUT)):
        open(MARKER, "w").close()
        time.sleep(4)  # on purpose: the test kills a TaskManager during this stall
    return record


def build(env):
    env.set_parallelism(1)
    env.enable_checkpointing(0.2)
    env.rate_source(50.0).map(stall_once, name="stall once").write_text(env.args[0])
'''


def links(chain) -> set:
    return {(e.id, e.kind, e.cause_id) for e in chain.events}


def under(chain, event) -> list:
    """Every event caused by ``event``, directly or not."""
    return [e for child in chain.children(event.id) for e in (child, *under(chain, child))]


def test_a_killed_taskmanagers_chain_of_causes_is_the_same_live_and_in_the_recording(
        client, cluster, tmp_path) -> None:
    """kill -9 of a TaskManager while a checkpoint is in progress (its barrier waits behind
    a record the job stalls on): the job's chain of causes has the loss at its root and
    the failed attempts, the restart, the aborted checkpoint and the restore from the
    last completed one under it, in the live snapshot and in the recording."""
    local_cluster, _ = cluster
    job = tmp_path / "stalling.py"
    job.write_text(STALLING_JOB.format(marker=str(tmp_path / "stalled"),
                                       out=str(tmp_path / "out")))
    job_id = client.submit(job, (str(tmp_path / "out"),))
    wait_for(lambda: (tmp_path / "stalled").exists()
             or ((s := client.snapshot(job_id, 1.0)) and s.graph.status.is_terminal), 120,
             "the stall")
    wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and (stats := s.graph.checkpoints)
             and stats.completed and stats.in_progress, 3, "a checkpoint held up by the stall")
    victim = kill_taskmanager_running(local_cluster, client, job_id, "stall once")

    def chain_with_all_of_it():
        snapshot = client.snapshot(job_id, 1.0)
        chain = snapshot.graph.causes if snapshot else None
        root = next((e for e in chain.roots() if e.kind is CauseKind.TASKMANAGER_LOST
                     and e.taskmanager_id == victim), None) if chain else None
        kinds = {e.kind for e in under(chain, root)} if root else set()
        return chain if {CauseKind.ATTEMPT_FAILED, CauseKind.REGION_RESTARTED,
                         CauseKind.CHECKPOINT_ABORTED, CauseKind.RESTORED} <= kinds else None
    live = wait_for(chain_with_all_of_it, 30, f"the chain of {victim}'s loss")
    check_cause_chain(live)
    (root,) = [e for e in live.roots() if e.taskmanager_id == victim]
    assert root.carried_by.type == "TaskManagerLost"
    assert all(e.taskmanager_id == victim for e in live.children(root.id)
               if e.kind is CauseKind.ATTEMPT_FAILED)
    restored = next(e for e in under(live, root) if e.kind is CauseKind.RESTORED)
    assert restored.checkpoint_id >= 1
    graph = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and s.graph, 10, "a snapshot")
    assert graph.root_cause.exception_type == TASKMANAGER_LOST
    client.cancel(job_id)
    assert wait_result(client, job_id, 60).status == JobStatus.CANCELED
    printed = clusterdeck(cluster, "failures", job_id)
    assert printed.returncode == 0, printed.stderr
    tree = printed.stdout.split("chain of causes:\n", 1)[-1].splitlines()
    loss = next(index for index, line in enumerate(tree)  # a root, and its restart under it
                if line.startswith("  - ") and f"TaskManager {victim} lost" in line)
    assert any(line.startswith("    ") and "restarts" in line for line in tree[loss:]), tree

    recording = local_cluster.cluster_dir / FILE_NAME
    recorded = wait_for(lambda: (graph := recorded_runs(recording).get(job_id, (None,))[0])
                        and graph.status is JobStatus.CANCELED and graph.causes, 30,
                        "the job's last snapshot in the recording")
    assert links(live) <= links(recorded)
    wait_for(lambda: local_cluster.supervisor.info(victim).pid, 60, f"{victim} restarted")


def test_a_killed_jobmanager_resumes_the_windows_from_their_last_checkpoint(
        client, cluster, tmp_path) -> None:
    """kill -9 of the JobManager mid-stream: the next one resumes every subtask from the
    last completed checkpoint (the one whose metadata is on disk), the attempts of the
    old run stop, and the committed output is the undisturbed run's."""
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


def test_three_vertices_joined_by_two_keyed_exchanges_resume_exactly_once(
        client, cluster, tmp_path) -> None:
    """Counts per key and window, then keyed again by window and summed: the middle
    vertex reads one exchange and writes another, aligning the barriers and passing
    them and its watermark on. kill -9 of the TaskManager running part of it once output
    flows: the committed totals are the undisturbed run's, each second's once."""
    local_cluster, _ = cluster
    out = tmp_path / "out"
    job_id = client.submit(TOTALS, (str(out), "5000", "500"))
    wait_for(lambda: len(committed(out)) >= 3, 90, "some totals committed")
    victim = kill_taskmanager_running(local_cluster, client, job_id, "count per key")
    result = wait_result(client, job_id, 180)
    assert result.status == JobStatus.FINISHED, described(result)
    assert committed(out) == sorted(f"{t},{t + 1},100" for t in range(50))
    assert result.failure_history, described(result)
    wait_for(lambda: local_cluster.supervisor.info(victim).pid, 60, f"{victim} restarted")


def test_at_least_once_loses_nothing_when_a_taskmanager_is_killed(
        client, cluster, tmp_path) -> None:
    """The same windows with unaligned barriers: after a kill some records may count twice
    (a window's count at least 10), none is lost (every window of every key is there)."""
    local_cluster, _ = cluster
    out = tmp_path / "out"
    job_id = client.submit(WINDOWS, (str(out), "5000", "500", "2", "at-least-once"))
    wait_for(lambda: len(committed(out)) >= 20, 90, "some windows committed")
    victim = kill_taskmanager_running(local_cluster, client, job_id, "rate_source")
    result = wait_result(client, job_id, 240)
    assert result.status == JobStatus.FINISHED, described(result)
    windows = {}
    for line in committed(out):
        key, start, end, count = line.split(",")
        windows.setdefault((key, start, end), []).append(int(count))
    assert sorted(windows) == sorted(tuple(line.split(",")[:3])
                                     for line in windows_expected(5000))
    assert all(sum(counts) >= 10 for counts in windows.values())
    wait_for(lambda: local_cluster.supervisor.info(victim).pid, 60, f"{victim} restarted")


def state_expected(count: int, users: int = 10) -> list[str]:
    """What examples/streaming_state.py writes for ``count`` records: per user, each run
    of ten of its records' indices as ``user,round,total``."""
    lines = []
    for user in range(users):
        indices = list(range(user, count, users))
        lines += [f"user-{user},{run},{sum(indices[run * 10:run * 10 + 10])}"
                  for run in range(len(indices) // 10)]
    return sorted(lines)


def test_a_job_stopped_with_a_savepoint_goes_on_from_it_when_resubmitted(
        client, tmp_path) -> None:
    """A savepoint while the job runs, then ``stop --savepoint``: the job FINISHES with part
    of its output committed; the same job submitted from that savepoint writes the rest,
    and the output is the undisturbed run's, once each. The job keeps per-key value state
    (a process function's rounds and totals per user), so a state not carried through
    the savepoint would show in its lines."""
    from clusterdeck.core.protocol.checkpoints import SavepointRestore
    from clusterdeck.core.rpc import RemoteError
    out = tmp_path / "out"
    # 24 s of input at 250 records/s: the two savepoints must both come before its end,
    # also on a loaded CI machine (at 500/s the job ended first there).
    job_id = client.submit(STATE, (str(out), "6000", "250"))
    wait_for(lambda: len(committed(out)) > 30, 60, "a few checkpoints committed")
    taken = client.savepoint(job_id, timeout=60)
    assert (Path(taken.path) / "_metadata").is_file()
    assert client.snapshot(job_id, 1.0).graph.status is JobStatus.RUNNING
    stopped = client.savepoint(job_id, stop=True, timeout=60)
    assert stopped.checkpoint_id > taken.checkpoint_id
    result = wait_result(client, job_id, 60)
    assert result.status == JobStatus.FINISHED, described(result)
    first = committed(out)
    assert first and set(first) < set(state_expected(6000))
    with pytest.raises(RemoteError, match="savepoints are of running streaming jobs"):
        client.savepoint(job_id, timeout=10)

    resumed = client.submit(STATE, (str(out), "6000", "250"),
                            savepoint=SavepointRestore(stopped.path))
    result = wait_result(client, resumed, 120)
    assert result.status == JobStatus.FINISHED, described(result)
    assert committed(out) == state_expected(6000)
    read = result.records[min(result.records)]["in"]   # the source vertex's
    assert 0 < read < 6000  # it went on from the savepoint, not from the start


def test_a_job_is_refused_a_savepoint_that_is_not_one_of_its_cluster(client, tmp_path) -> None:
    from clusterdeck.core.protocol.checkpoints import SavepointRestore
    from clusterdeck.core.rpc import RemoteError
    with pytest.raises(RemoteError, match="is not a savepoint of this cluster"):
        client.submit(EXAMPLE, (str(tmp_path / "out"), "10", "500"),
                      savepoint=SavepointRestore(str(tmp_path)))


SLOW_SINK_JOB = '''
import time


def slow(a, b):
    time.sleep(0.002)  # about 500 records a second at most: the consumer is the bottleneck
    return b


def build(env):
    env.set_parallelism(1)
    env.enable_checkpointing(0.5)
    (env.rate_source(float(env.args[1]))
        .map(lambda record: (record[1], record[0], "x" * 1000))  # a kilobyte each
        .key_by(0)
        .reduce(slow)
        .map(lambda record: record[1])
        .write_text(env.args[0]))
'''


def source_position(work: Path, job_id: str) -> int:
    """How far the source had read at its newest checkpoint (its snapshot's position)."""
    newest = max((path for path in work.glob(f"**/checkpoints/{job_id}/chk-*/vertex-1%230.state")),
                 key=lambda path: int(path.parent.name[4:]), default=None)
    return 0 if newest is None else int(json.loads(newest.read_text())["source"])


def test_a_slow_consumer_slows_the_source_and_no_process_grows(
        client, cluster, tmp_path) -> None:
    """Backpressure: a source offering 5,000 records (5 MB) a second to a consumer that
    takes about 500: the exchange's bounded buffers fill, the source's emits wait, and it
    reads at the consumer's pace; no TaskManager's memory grows with what is offered."""
    local_cluster, _ = cluster
    job = tmp_path / "slow_sink.py"
    job.write_text(SLOW_SINK_JOB)
    job_id = client.submit(job, (str(tmp_path / "out"), "5000"))
    work = Path(local_cluster.cluster_dir)
    wait_for(lambda: source_position(work, job_id) > 0, 90, "a checkpoint of the source")
    wait_for(lambda: committed(tmp_path / "out"), 60, "output flowing")
    processes = {name: psutil.Process(pid_of(local_cluster, name))
                 for name in ("taskmanager-1", "taskmanager-2")}
    first_position, first_time = source_position(work, job_id), time.monotonic()
    first_memory = {name: process.memory_info().rss for name, process in processes.items()}
    wait_for(lambda: time.monotonic() - first_time > 10, 20, "ten seconds")
    read = source_position(work, job_id) - first_position
    elapsed = time.monotonic() - first_time
    grown = {name: (process.memory_info().rss - first_memory[name]) // 2 ** 20
             for name, process in processes.items()}
    client.cancel(job_id)
    assert wait_result(client, job_id, 60).status == JobStatus.CANCELED
    assert all(mib < 30 for mib in grown.values()), grown  # 50 MB were offered meanwhile
    # checkpoints go on (their barriers wait behind a few buffers only), and the source's
    # position in them moves at the consumer's pace, not at the rate offered
    assert 0 < read / elapsed < 5000 * 0.4, f"{read} records in {elapsed:.1f} s"


def test_batch_functions_before_and_after_a_window_commit_exactly_its_counts(
        client, tmp_path) -> None:
    """map_batches, records and Arrow (examples/streaming_batches.py): the keyed window
    counts committed exactly, as the per-record job's."""
    out = tmp_path / "out"
    job_id = client.submit(BATCHES, (str(out), "2000", "1000"))
    result = wait_result(client, job_id, 120)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert committed(out) == windows_expected(2000)
    assert staged(out) == []


def test_a_declarative_job_over_columns_commits_the_per_record_jobs_counts(
        client, tmp_path) -> None:
    """examples/streaming_columns.py: the rate source's Arrow batches, timestamps from a
    field, routed by key column to two windows: streaming_window.py's output exactly."""
    out = tmp_path / "out"
    job_id = client.submit(COLUMNS, (str(out), "2000", "1000", "2"))
    result = wait_result(client, job_id, 120)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert committed(out) == windows_expected(2000)
    assert staged(out) == []
