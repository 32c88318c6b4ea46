"""A network that misbehaves short of a cut, full disks and a clock set wrong, on the
bridged machines of tests/integration/netns.py (issue 38; the cuts themselves are
test_network_cuts.py's, which also proves that a stale attempt's output is never read).

The JobManager's machine is this one, its broker on the bridge's address with TLS. Two
TaskManagers on machines of their own: their way to the broker passes a relay of the
test's (``DelayRelay``: latency, as netem would add), and the second one's wall clock is
30 s behind (libfaketime) for the whole module, as a machine's whose clock was set wrong.
Real broker, real processes, real Spark; the tests share one cluster, in file order.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.causes import CauseEvent, CauseKind
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from tests.integration.clusters import (
    FAST_HEARTBEATS,
    ClusterWatcher,
    running_cluster,
    wait_result,
)
from tests.integration.namespaces import (
    NamespacedTaskManager,
    namespaced_taskmanagers,
    wait_registered,
)
from tests.integration.netns import (
    DelayRelay,
    Network,
    bridged_machines,
    process_cut_from,
    with_clock_offset,
)
from tests.integration.test_network_cuts import GATED_COUNT, _consumers_running, _why
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
SKEW = -30.0  # the second TaskManager's wall clock, against this machine's
# The JobManager finds a TaskManager lost after 4 s of silence (the default is 6 s, the
# other tests' 1.5 s): short enough for a false "lost" under delay and loss to show within
# a test, not so short that a loaded machine's pauses make one. The TaskManagers are more
# patient with it, as in test_network_cuts.py.
JOBMANAGER_HEARTBEATS = {"heartbeat.interval": 0.5, "heartbeat.timeout": 4.0}
# A fetch from a silent data port stalls 4 s before its next try, not the default 10 s: the
# two data-port tests wait out three tries (a 5% loss stalls a TCP read far less). A stream
# channel tries to reach its producer for 8 s, not 60 s (TCP's own SYN retries under 5%
# loss take 1 s, then 3 s).
TASKMANAGER_CONFIG = {**FAST_HEARTBEATS, "heartbeat.interval": 0.5, "heartbeat.timeout": 60.0,
                      "taskmanager.slots": 2, "spark.start": "eager",
                      "taskmanager.data.fetch-timeout": 4.0,
                      "taskmanager.data.connect-timeout": 8.0}
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 10,
            "restart-strategy.fixed-delay.delay": 0.2}
DELAY, LOSS = 0.2, 5
BLOCKED_FOR = 60.0  # jobmanager.blocklist.timeout's default: a full disk's TaskManager
JOBMANAGER_CUT = 10.0  # seconds: past the JobManager's heartbeat timeout (4 s) twice


@dataclass
class Cluster:
    local: LocalCluster
    watcher: ClusterWatcher
    network: Network
    relay: DelayRelay
    taskmanagers: list[NamespacedTaskManager]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("faults")
    with bridged_machines(2) as network, \
            running_cluster("auto", **{"taskmanager.count": 0, "broker.bind": network.gateway,
                                       **JOBMANAGER_HEARTBEATS}) as (local, watcher):
        relay = DelayRelay(network, local.broker_address().port)
        first, second = network.machines
        try:
            with namespaced_taskmanagers(
                    local, 2, folder, TASKMANAGER_CONFIG, broker_host=network.gateway,
                    networks=[first.enter, with_clock_offset(second.enter, SKEW)]
                    ) as taskmanagers:
                wait_registered(watcher, taskmanagers)
                wait_for(lambda: all("SparkSession started" in t.log.read_text()
                                     for t in taskmanagers), 120, "Spark up on both")
                yield Cluster(local, watcher, network, relay, taskmanagers)
        finally:
            relay.close()


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Iterator[JobClient]:
    with JobClient(cluster.local.config, connect_timeout=30) as job_client:
        yield job_client


def words_file(folder: Path, lines: int = 4000) -> tuple[str, dict[str, int]]:
    path = folder / "words.txt"
    rows = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(i % 9 + 1))
            for i in range(lines)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path.as_uri(), dict(collections.Counter(w for row in rows for w in row.split()))


def _word_count(client: JobClient, folder: Path, timeout: float = 180) -> str:
    """A word count of parallelism 4, checked exact; its id."""
    source, expected = words_file(folder)
    job_id = client.submit(EXAMPLES / "wordcount.py", [source, "4"], restart_strategy=RESTARTS)
    result = wait_result(client, job_id, timeout)
    assert result.status is JobStatus.FINISHED, _why(result)
    assert dict(collected_rows(result)) == expected
    return job_id


def _lost_events(watcher: ClusterWatcher) -> list[p.TaskManagerLost]:
    return [e for e in list(watcher.events) if isinstance(e, p.TaskManagerLost)]


def test_a_clock_set_30_s_wrong_is_measured_and_shown(cluster: Cluster, client: JobClient,
                                                     tmp_path: Path) -> None:
    """The second TaskManager's wall clock is 30 s behind: the ResourceManager measures
    its offset from its heartbeats and shows it, the other's is about 0, and a word count
    on both is exact (timeouts and durations run on monotonic clocks)."""
    skewed = cluster.taskmanagers[1]

    def offsets() -> dict[str, float | None]:
        return {t.id: info.clock_offset_s if (info := cluster.watcher.taskmanager(t.id))
                else None for t in cluster.taskmanagers}

    wait_for(lambda: all(v is not None for v in offsets().values()), 30, "offsets measured")
    measured = offsets()
    assert abs(measured[skewed.id] - SKEW) < 2.0, measured
    assert abs(measured[cluster.taskmanagers[0].id]) < 2.0, measured
    status = subprocess.run(
        [*_cli(cluster), "status"], capture_output=True, text=True, timeout=60, check=False)
    assert status.returncode == 0, status.stderr
    assert re.search(rf"{skewed.id}.*\n.*clock -(29|30|31) s off", status.stdout), \
        status.stdout
    _word_count(client, tmp_path)


def _cli(cluster: Cluster) -> list[str]:
    return [sys.executable, "-m", "clusterdeck.core.cli", "--cluster",
            cluster.local.cluster_id]


def test_with_delay_and_loss_on_every_link_a_batch_and_a_streaming_job_are_exact_none_lost(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """200 ms each way between the TaskManagers and the broker, 5% of frames lost each
    way on both TaskManagers' links: a word count and a streaming window count finish
    exactly, and no TaskManager is declared lost. (How much slower: the benchmark's, a
    loaded machine's own pauses are larger than the difference.)"""
    before = len(_lost_events(cluster.watcher))
    cluster.relay.delay = DELAY
    for machine in cluster.network.machines:
        machine.lose(LOSS)
    try:
        _word_count(client, tmp_path, 300)
        out = tmp_path / "out"
        job_id = client.submit(EXAMPLES / "streaming_window.py",
                               (str(out), "3000", "500", "2"), restart_strategy=RESTARTS)
        result = wait_result(client, job_id, 240)
    finally:
        cluster.relay.delay = 0.0
        for machine in cluster.network.machines:
            machine.lose(0)
    assert result.status is JobStatus.FINISHED, _why(result)
    assert _committed(out) == sorted(f"key-{k},{t},{t + 1},10" for k in range(10)
                                     for t in range(30))
    assert _lost_events(cluster.watcher)[before:] == []


def _committed(folder: Path) -> list[str]:
    return sorted(line for path in folder.iterdir() if path.name.startswith("part-")
                  for line in path.read_text().splitlines()) if folder.is_dir() else []


def _data_port(taskmanager: NamespacedTaskManager) -> int:
    return _logged_port(taskmanager, r"data service at https://[\d.]+:(\d+)")


def _channel_port(taskmanager: NamespacedTaskManager) -> int:
    return _logged_port(taskmanager, r"stream channels at [\d.]+:(\d+)")


def _logged_port(taskmanager: NamespacedTaskManager, pattern: str) -> int:
    """The port its start-up line names (``pattern``'s group)."""
    found = re.search(pattern, taskmanager.log.read_text(errors="replace"))
    assert found, taskmanager.output()
    return int(found.group(1))


def _failures(client: JobClient, job_id: str) -> list[p.FailureRecord]:
    snapshot = client.snapshot(job_id, timeout=5.0)
    return list(snapshot.graph.failures) if snapshot is not None else []


def _blocks_of(snapshot: p.JobSnapshot | None) -> list[CauseEvent]:
    chain = snapshot.graph.causes if snapshot is not None else None
    return [e for e in (chain.events if chain else ())
            if e.kind is CauseKind.TASKMANAGER_BLOCKED]


@pytest.mark.slow
def test_a_data_port_unreachable_one_way_is_blamed_on_its_taskmanager_and_the_job_recovers(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """The first TaskManager's data port lets requests in but nothing out (its MQTT link
    is fine): a fetch of its partitions fails naming it as the producer's TaskManager, the
    job blocks it, and its producers run again on the other one: the job ends exactly
    while the port stays closed."""
    producer = cluster.taskmanagers[0]
    machine = cluster.network.machines[0]
    source, expected = words_file(tmp_path)
    machine.close_port(_data_port(producer))
    try:
        closed_at = time.monotonic()
        job_id = client.submit(EXAMPLES / "wordcount.py", [source, "4"],
                               restart_strategy=RESTARTS)
        result = wait_result(client, job_id, 240)
        took = time.monotonic() - closed_at
        snapshot = client.snapshot(job_id, timeout=5.0)
    finally:
        machine.reopen_port()
    assert result.status is JobStatus.FINISHED, _why(result)
    assert dict(collected_rows(result)) == expected
    assert snapshot is not None
    failures = list(snapshot.graph.failures)
    blamed = [f for f in failures if producer.id in f.failure.message]
    assert blamed and all(f.failure.exception_type in ("PartitionNotFound", "ResultNotFetched")
                          for f in blamed), [f.failure for f in failures]
    blocks = _blocks_of(snapshot)
    assert blocks and all(e.taskmanager_id == producer.id for e in blocks), blocks
    assert "did not answer" in blocks[0].summary, blocks[0].summary
    print(f"data port closed one way: {blamed[0].failure.exception_type} naming "
          f"{producer.id}, blocked; exact {took:.1f} s after the submission, port closed")


# streaming_window.py's job in two subtasks, so it fits one TaskManager's two slots
NARROW_WINDOWS = '''
def build(env):
    env.set_job_name("narrow rate windows").set_parallelism(1)
    env.enable_checkpointing(0.5)
    (env.rate_source(500.0, int(env.args[1]))
        .assign_timestamps(lambda record: record[0] / 100, max_out_of_orderness=0.2)
        .key_by(1)
        .window(1.0).count()
        .map(lambda window: f"{window[0]},{window[1]:g},{window[2]:g},{window[3]}")
        .write_text(env.args[0]))
'''


def test_stream_channel_ports_unreachable_one_way_are_blamed_and_the_stream_recovers(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """Each TaskManager's stream channel port lets connections in but nothing out (its
    own tasks still reach it, over its loopback): the window subtask reading the source
    subtask on the other TaskManager (two slots are asked for at once, one from each)
    fails within taskmanager.data.connect-timeout naming it; the job blocks that one
    and runs on the other alone: every window exactly once, the ports still closed."""
    ids = {t.id for t in cluster.taskmanagers}
    job_file, out = tmp_path / "narrow.py", tmp_path / "out"
    job_file.write_text(NARROW_WINDOWS, encoding="utf-8")
    for taskmanager, machine in zip(cluster.taskmanagers, cluster.network.machines,
                                    strict=True):
        machine.close_port(_channel_port(taskmanager))
    try:
        closed_at = time.monotonic()
        job_id = client.submit(job_file, (str(out), "3000"), restart_strategy=RESTARTS)
        result = wait_result(client, job_id, 180)
        took = time.monotonic() - closed_at
        snapshot = client.snapshot(job_id, timeout=5.0)
    finally:
        for machine in cluster.network.machines:
            machine.reopen_port()
    assert result.status is JobStatus.FINISHED, _why(result)
    assert _committed(out) == sorted(f"key-{k},{t},{t + 1},10" for k in range(10)
                                     for t in range(30))
    assert snapshot is not None
    failures = list(snapshot.graph.failures)
    assert failures and all("nothing served within 8 s" in f.failure.message
                            for f in failures), [f.failure.message for f in failures]
    blocked = {e.taskmanager_id for e in _blocks_of(snapshot)}
    assert len(blocked) == 1 and blocked < ids, _blocks_of(snapshot)
    assert blocked.pop() in failures[0].failure.message
    print(f"stream channel ports closed one way: {len(failures)} failure(s), one "
          f"TaskManager blocked; exact {took:.1f} s after the submission, ports closed")


@pytest.mark.slow
def test_two_taskmanagers_that_cannot_reach_each_other_blame_the_producers_and_recover(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """Every frame between the two TaskManagers' machines dropped, both ways, while both
    reach the broker: a consumer fetching from a producer on the other machine fails
    naming that producer's TaskManager, none is declared lost, the job blocks one of
    the two (not both: the blocked one's blame of the other counts for nothing) and ends
    exactly on the other while they stay parted."""
    first, second = cluster.network.machines
    ids = {t.id for t in cluster.taskmanagers}
    lost_before = len(_lost_events(cluster.watcher))
    source, expected = words_file(tmp_path)
    first.part_from(second.address)
    try:
        parted_at = time.monotonic()
        job_id = client.submit(EXAMPLES / "wordcount.py", [source, "4"],
                               restart_strategy=RESTARTS)
        result = wait_result(client, job_id, 240)
        took = time.monotonic() - parted_at
        snapshot = client.snapshot(job_id, timeout=5.0)
    finally:
        first.rejoin()
    assert result.status is JobStatus.FINISHED, _why(result)
    assert dict(collected_rows(result)) == expected
    assert snapshot is not None
    failures = list(snapshot.graph.failures)
    blamed = [f for f in failures if f.taskmanager_id in ids
              and (ids - {f.taskmanager_id}).pop() in f.failure.message]
    assert blamed and blamed[0].failure.exception_type == "PartitionNotFound", \
        [f.failure for f in failures]
    assert len({e.taskmanager_id for e in _blocks_of(snapshot)}) == 1, _blocks_of(snapshot)
    assert _lost_events(cluster.watcher)[lost_before:] == []
    print(f"TaskManagers parted: PartitionNotFound naming the producer's TaskManager, "
          f"{_blocks_of(snapshot)[0].taskmanager_id} blocked; exact {took:.1f} s after the "
          f"submission, still parted")


def _in_namespace_of(taskmanager: NamespacedTaskManager, script: str) -> None:
    done = subprocess.run(["nsenter", "-t", str(taskmanager.pid), "-m", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


@contextmanager
def filled_work_dir(taskmanager: NamespacedTaskManager, work: Path) -> Iterator[None]:
    """``work`` in ``taskmanager``'s mount namespace on a 1 MiB tmpfs filled to the brim,
    for the body of the block; unmounted after it, also on a failure."""
    _in_namespace_of(taskmanager, f"mkdir -p '{work}' && mount -t tmpfs -o size=1m cd-full "
                                  f"'{work}' && (dd if=/dev/zero of='{work}/.filler' bs=64k "
                                  "2>/dev/null; true)")
    try:
        yield
    finally:
        _in_namespace_of(taskmanager, f"umount -l '{work}'")


def test_a_taskmanagers_full_work_dir_is_named_blocked_and_nothing_stored_is_lost(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """The first TaskManager's work dirs on a small tmpfs, filled: its attempts fail with
    a cause naming its work dir as full (not their producers, not a bare ENOSPC), the job
    blocks it (an event in its chain of causes says until when) and ends exactly on the
    other one; emptied, a word count on both is exact, and an earlier job's result still
    reads the same."""
    earlier = _word_count(client, tmp_path)
    earlier_rows = dict(collected_rows(client.result(earlier)))
    full, other = cluster.taskmanagers
    work = cluster.local.cluster_dir / "work"
    with filled_work_dir(full, work):
        source, expected = words_file(tmp_path)
        started = time.monotonic()
        job_id = client.submit(EXAMPLES / "wordcount.py", [source, "4"],
                               restart_strategy=RESTARTS)
        result = wait_result(client, job_id, 240)
        took = time.monotonic() - started
        snapshot = client.snapshot(job_id, timeout=5.0)
    assert snapshot is not None
    failures = list(snapshot.graph.failures)
    named = [f for f in failures if f.failure.exception_type == "DiskFull"]
    assert named, [f.failure.message for f in failures]
    assert all(f"TaskManager {full.id}'s work dir {work}" in f.failure.message
               and "is full" in f.failure.message for f in named), named[0].failure.message
    assert not any(f.failure.exception_type == "PartitionNotFound" for f in failures)
    assert result.status is JobStatus.FINISHED, _why(result)
    assert dict(collected_rows(result)) == expected
    blocks = _blocks_of(snapshot)
    assert blocks and all(e.taskmanager_id == full.id for e in blocks), blocks
    assert f"TaskManager {full.id} blocked until " in blocks[0].summary, blocks[0].summary
    assert "DiskFull" in blocks[0].summary, blocks[0].summary
    deployed = [(a.state_timestamps.get(ExecutionState.DEPLOYING, 0.0), a.slot.taskmanager_id,
                 a.state) for v in snapshot.graph.vertices for s in v.subtasks
                for a in s.attempts if a.slot is not None]
    blocked_from = min(e.at for e in blocks)
    assert all(tm == other.id for at, tm, _ in deployed
               if blocked_from < at < blocked_from + BLOCKED_FOR), deployed
    print(f"full disk: FINISHED in {took:.1f} s, {len(named)} DiskFull failure(s), "
          f"{len(blocks)} block(s) of {full.id}")
    _word_count(client, tmp_path)
    assert dict(collected_rows(client.result(earlier))) == earlier_rows


def test_a_full_job_store_refuses_a_submission_naming_it_and_keeps_the_stored_jobs(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """The JobManager's job store moved onto a small tmpfs (a copy, mounted over it) and
    filled: a submission is refused with a cause naming the job store as full, and
    nothing of it is left there; the store back, the next job runs and an earlier job's
    result still reads the same."""
    earlier = _word_count(client, tmp_path)
    earlier_rows = dict(collected_rows(client.result(earlier)))
    store = cluster.local.cluster_dir / "jobs"
    small = tmp_path / "small-store"
    small.mkdir()
    _mount(["-t", "tmpfs", "-o", "size=16m", "cd-store", str(small)])
    try:
        subprocess.run(["cp", "-a", f"{store}/.", str(small)], check=True, timeout=60)
        subprocess.run(["dd", "if=/dev/zero", f"of={small}/.filler", "bs=64k"],
                       capture_output=True, timeout=60, check=False)
        _mount(["--bind", str(small), str(store)])
        try:
            source, _ = words_file(tmp_path)
            with pytest.raises(Exception) as refused:
                client.submit(EXAMPLES / "wordcount.py", [source, "4"])
            left = sorted(path.name for path in store.iterdir())
        finally:
            _mount(["-u", str(store)], "umount")
    finally:
        _mount(["-u", str(small)], "umount")
    assert f"the JobManager's job store {store} is full" in str(refused.value), refused.value
    assert left == sorted([".filler", *(path.name for path in store.iterdir())]), left
    _word_count(client, tmp_path)
    assert dict(collected_rows(client.result(earlier))) == earlier_rows


def _mount(args: list[str], command: str = "mount") -> None:
    if command == "umount":
        args = ["-l", *args[1:]]
    done = subprocess.run([command, *args], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_jobmanager_cut_off_from_its_broker_goes_on_with_the_work_done_and_runs_no_job_twice(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """Every producer finished, the consumers wait at a gate, and the JobManager is cut
    off from the broker for longer than its heartbeat timeout (its sockets to it dropped,
    silently): the TaskManagers keep their finished partitions, and once healed the same
    job goes on to the exact count, listed once."""
    source, expected = words_file(tmp_path)
    job_file, gate = tmp_path / "gated.py", tmp_path / "gate"
    job_file.write_text(GATED_COUNT, encoding="utf-8")
    job_id = client.submit(job_file, [source, str(gate)], restart_strategy=RESTARTS)
    producers, _ = wait_for(lambda: _consumers_running(client, job_id), 180,
                            "every producer finished and every consumer running")
    jobmanager = cluster.local.supervisor.info("jobmanager").pid
    assert jobmanager is not None
    with process_cut_from(jobmanager, cluster.local.broker_address().port):
        cut_at = time.monotonic()
        time.sleep(JOBMANAGER_CUT)  # the cut lasts its length: nothing to wait for
        gate.touch()
    result = wait_result(client, job_id, 180)
    took = time.monotonic() - cut_at
    assert result.status is JobStatus.FINISHED, _why(result)
    assert dict(collected_rows(result)) == expected
    assert [j.job_id for j in client.jobs().jobs].count(job_id) == 1
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    rerun = [s.attempts[-1].attempt_id for s in snapshot.graph.vertices[0].subtasks
             if s.attempts[-1].attempt_id not in producers]
    assert rerun == [], (took, [f.failure.message for f in snapshot.graph.failures])
