"""TaskManagers on other "machines" of a bridged network, cut off silently and healed
(issue 41).

The JobManager's machine is this one: its broker binds the bridge's address, with TLS
as beyond loopback it must. Each TaskManager runs in a network and a mount namespace of
its own (tests/integration/netns.py, namespaces.py) and joins with a file from
``clusterdeck credentials export --host <bridge address>``, as on another machine. A cut
drops every frame of a machine's link, with no answer of any kind. Real broker, real
processes, real Spark. The tests share one cluster and run in file order.
"""

from __future__ import annotations

import collections
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.executiongraph.failurehandling import PARTITIONS_LOST_WITH
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.ids import attempt_file_stem, parse_attempt_id
from clusterdeck.core.protocol.snapshots import AttemptSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.protocol.workdir import collected_rows_file, partitions_dir
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
from tests.integration.netns import Direction, Machine, Network, bridged_machines
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(360)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
# The JobManager finds a silent TaskManager lost after about 2 s (FAST_HEARTBEATS); the
# TaskManagers are more patient with it (60 s), so tasks that end during a cut finish
# and report, rather than being cancelled by their TaskManager first.
# Spark starts with each TaskManager, before the tests time anything.
# A reconnect timeout shorter than a test's long cut (paho finds a silent broker gone
# after one to two keepalives of 10 s).
TASKMANAGER_CONFIG = {**FAST_HEARTBEATS, "taskmanager.slots": 2, "heartbeat.timeout": 60.0,
                      "spark.start": "eager", "broker.reconnect-timeout": 4.0}
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 10,
            "restart-strategy.fixed-delay.delay": 0.2}

# Producers count; each consumer subtask waits for the gate file before it ends: the test
# cuts a TaskManager while its consumers wait there and opens the gate during the cut.
# Given a release file and a HOME, consumers running elsewhere than the machine of that
# HOME (each namespaced TaskManager has its own) then wait for the release too: the job
# stays running until the test lets it end.
GATED_COUNT = '''
import os, time

def build(env):
    source, gate = env.args[:2]
    release, home = env.args[2:] or ("", "")
    env.set_parallelism(4)
    env.set_job_name("gated count")

    def wait_for_gate(pair):
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
        held = release and os.environ.get("HOME") != home
        while held and not os.path.exists(release) and time.monotonic() < deadline + 180:
            time.sleep(0.05)
        return pair

    (env.read_text(source).flat_map(lambda line: line.split())
        .map(lambda word: (word, 1)).key_by(0).sum(1)
        .map(wait_for_gate).collect())
'''

# Each record a 512-character string of digests (Parquet cannot shrink it much), all
# rebalanced: every consumer fetches a quarter of every remote producer's output, about
# 1 MB, which lasts seconds over a link throttled to 512 kbit/s.
BIG_EXCHANGE = """
import hashlib

def build(env):
    records = int(env.args[0])
    env.set_parallelism(4)
    env.set_job_name("big exchange")

    def digests(i):
        return (i % 8, "".join(hashlib.sha256(f"{i}-{j}".encode()).hexdigest()
                               for j in range(8)))

    (env.from_range(records).map(digests).rebalance()
        .map(lambda pair: (pair[0], len(pair[1]))).key_by(0).sum(1).collect())
"""
BIG_RECORDS = 12_000
# A lost TaskManager's partitions are made again at once: the job ends well before a
# consumer could have given up fetching them from it (3 tries of 10 s each).
LOST_PARTITIONS_BOUND = 75.0
# A task fetching from a peer cut off silently ends within the fetch's bound (3 tries of
# a 10 s stall timeout, core/dataservice/client.py), or, once its TaskManager finds its
# JobManager silent (heartbeat.timeout), at once; today it hung for 90 s and more.
MID_FETCH_END_BOUND = 45.0


@dataclass
class Cluster:
    local: LocalCluster
    watcher: ClusterWatcher
    network: Network
    taskmanagers: list[NamespacedTaskManager]

    def machine_of(self, taskmanager: NamespacedTaskManager) -> Machine:
        return self.network.machines[self.taskmanagers.index(taskmanager)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two machines on a bridge, a TaskManager on each; the JobManager has none."""
    folder = tmp_path_factory.mktemp("bridged")
    with bridged_machines(2) as network, \
            running_cluster("auto", **{"taskmanager.count": 0,
                                       "broker.bind": network.gateway}) as (local, watcher), \
            namespaced_taskmanagers(
                local, 2, folder, TASKMANAGER_CONFIG, broker_host=network.gateway,
                networks=[m.enter for m in network.machines]) as taskmanagers:
        wait_registered(watcher, taskmanagers)
        wait_for(lambda: all("SparkSession started" in t.log.read_text()
                             for t in taskmanagers), 180, "Spark up on both TaskManagers")
        yield Cluster(local, watcher, network, taskmanagers)


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Iterator[JobClient]:
    with JobClient(cluster.local.config, connect_timeout=30) as job_client:
        yield job_client


def words_file(folder: Path, lines: int = 2000) -> tuple[str, collections.Counter[str]]:
    """A file:// URL of a text of WORDS (any machine reads it: a shared mount), and its
    word counts."""
    path = folder / "words.txt"
    rows = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(i % 9 + 1))
            for i in range(lines)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path.as_uri(), collections.Counter(word for row in rows for word in row.split())


def test_each_taskmanager_is_on_a_machine_of_its_own_and_a_cut_is_silent(
        cluster: Cluster) -> None:
    first, second = cluster.network.machines
    for machine, taskmanager in zip(cluster.network.machines, cluster.taskmanagers,
                                    strict=True):
        assert Path(f"/proc/{taskmanager.pid}/ns/net").readlink() != \
            Path("/proc/self/ns/net").readlink()
        assert f"data service at https://{machine.address}:" in taskmanager.log.read_text()
    probe = ["python3", "-c", "import socket, sys; "
             "socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)",
             cluster.network.gateway, str(cluster.local.broker_address().port)]
    assert first.run(probe).returncode == 0
    for direction in Direction:
        first.cut(direction)
        try:
            cut = first.run(probe)
            assert "timed out" in cut.stderr, (direction, cut.stderr)  # no RST, no ICMP
            assert second.run(probe).returncode == 0
        finally:
            first.heal()
        assert first.run(probe).returncode == 0


def _host(attempt: AttemptSnapshot) -> str:
    return attempt.slot.taskmanager_id if attempt.slot else ""


def _why(result: p.JobResult) -> str:
    cause = result.root_cause or {}
    return f"{cause.get('exception_type')}: {cause.get('message')}"


def _lost(watcher: ClusterWatcher, taskmanager_id: str) -> bool:
    info = watcher.taskmanager(taskmanager_id)
    return info is not None and info.state is p.TaskManagerState.LOST


def test_the_finished_attempts_of_a_taskmanager_cut_off_and_lost_are_never_fetched(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """Its consumers, their input fetched, wait at the gate when it is cut off; the gate
    opens, it is declared lost, their attempts fail and run again elsewhere while they
    finish there. After the heal it sends their FINISHED: the JobManager refuses them
    before it fetches anything of theirs, says so, and the count is exact. (The consumers
    elsewhere wait for a release until then: the job, run again at once, would have
    ended, its JobMaster gone with none to answer.)"""
    source, expected = words_file(tmp_path)
    job_file, gate, release = tmp_path / "gated.py", tmp_path / "gate", tmp_path / "release"
    job_file.write_text(GATED_COUNT, encoding="utf-8")
    cut_off = cluster.taskmanagers[0]
    job_id = client.submit(job_file, [source, str(gate), str(release),
                                      str(cut_off.own / "home")], restart_strategy=RESTARTS)
    work_dir = cluster.local.cluster_dir / "work" / job_id
    producers, consumers = wait_for(lambda: _consumers_running(client, job_id), 180,
                                    "every producer finished and every consumer running")
    stale = [attempt for attempt, host in consumers.items() if host == cut_off.id]
    assert stale, f"no consumer on {cut_off.id}: {consumers}"
    wait_for(lambda: _inputs_here(cut_off, work_dir, producers, stale), 120,
             f"the inputs of {stale} fetched to {cut_off.id}")
    machine = cluster.machine_of(cut_off)
    machine.cut()
    try:
        gate.touch()
        wait_for(lambda: _lost(cluster.watcher, cut_off.id), 30, f"{cut_off.id} lost")
        wait_for(lambda: all(cut_off.sees(collected_rows_file(work_dir, a)).is_file()
                             for a in stale), 50, f"{stale} finished on {cut_off.id}")
    finally:
        machine.heal()
    ends = wait_for(lambda: _ends_reported(cut_off, stale), 60,
                    f"{cut_off.id} to be answered on the end of each of {stale}")
    release.touch()
    result = wait_result(client, job_id, 120)
    assert result.status is JobStatus.FINISHED, _why(result)
    assert {word: count for word, count in collected_rows(result)} == dict(expected)
    assert set(ends.values()) == {"FINISHED"}, ends
    fetched = [a for a in stale if any(work_dir.rglob(f"{attempt_file_stem(a)}*"))]
    assert fetched == [], f"files of stale attempts fetched into {work_dir}"


def _consumers_running(client: JobClient, job_id: str
                       ) -> tuple[dict[str, str], dict[str, str]] | None:
    """Once every producer finished and every consumer runs, the TaskManager of each
    producer attempt and of each consumer attempt; else None."""
    snapshot = client.snapshot(job_id, timeout=5.0)
    if snapshot is None:
        return None
    producer, consumer = snapshot.graph.vertices
    if any(s.state is not ExecutionState.FINISHED for s in producer.subtasks) or \
            any(s.state is not ExecutionState.RUNNING for s in consumer.subtasks):
        return None
    return ({s.attempts[-1].attempt_id: _host(s.attempts[-1]) for s in producer.subtasks},
            {s.attempts[-1].attempt_id: _host(s.attempts[-1]) for s in consumer.subtasks})


def _inputs_here(taskmanager: NamespacedTaskManager, work_dir: Path,
                 producers: dict[str, str], consumers: list[str]) -> bool:
    """Whether the partitions ``consumers`` read from producers on other TaskManagers
    are all on ``taskmanager``'s disk, whole (their completion marker comes last): the
    consumers need the network no more."""
    parts = [parse_attempt_id(attempt).subtask for attempt in consumers]
    return all(any(taskmanager.sees(partitions_dir(work_dir, producer)).glob(
                   f"*/__part={part}/_complete.json"))
               for producer, host in producers.items() if host != taskmanager.id
               for part in parts)


def _ends_reported(taskmanager: NamespacedTaskManager, attempts: list[str]
                   ) -> dict[str, str] | None:
    """The end of each of ``attempts`` its TaskManager reported and was refused (all of
    them stale), FINISHED or CANCELED; None while one is missing."""
    log = taskmanager.log.read_text(errors="replace")
    ends = {}
    for attempt in attempts:
        found = re.search(rf"update (FINISHED|CANCELED|FAILED) of {re.escape(attempt)} "
                          rf"not accepted: ", log)
        if found is None:
            return None
        ends[attempt] = found.group(1)
    return ends


def test_a_taskmanager_cut_off_longer_than_the_reconnect_timeout_rejoins_after_the_heal(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """Started by hand, as on another machine, it has no supervisor to start it again: past
    broker.reconnect-timeout it keeps reconnecting (and says so) instead of exiting, and
    once healed it registers again and runs its share of a job."""
    cut_off = cluster.taskmanagers[-1]
    machine = cluster.machine_of(cut_off)
    machine.cut()
    try:
        wait_for(lambda: "keeps reconnecting" in cut_off.log.read_text(errors="replace")
                 or cut_off.process.poll() is not None, 90,
                 f"{cut_off.id} past broker.reconnect-timeout without its broker")
        assert cut_off.process.poll() is None, cut_off.output()
    finally:
        machine.heal()
    wait_for(lambda: cut_off.id in cluster.watcher.registered()
             and "the broker connection is back after" in cut_off.log.read_text(
                 errors="replace"), 60, f"{cut_off.id} back and registered again")
    source, expected = words_file(tmp_path)
    job_id = client.submit(EXAMPLES / "wordcount.py", [source, "4"])
    result = wait_result(client, job_id, 120)
    assert result.status is JobStatus.FINISHED, _why(result)
    assert {word: count for word, count in collected_rows(result)} == dict(expected)
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    assert cut_off.id in {_host(a) for v in snapshot.graph.vertices for s in v.subtasks
                          for a in s.attempts}


def test_the_partitions_lost_with_a_taskmanager_are_made_again_while_it_stays_cut_off(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """Every producer finished and every consumer waits at the gate when one TaskManager
    is cut off for good (healed only once the job ended). Found lost, the producers it ran
    run again at once on the other TaskManager, their loss recorded as the cause, with
    the consumers still needing their output; the producers that ran elsewhere keep their
    result, no consumer waits on a fetch from the lost one, and the count is exact."""
    source, expected = words_file(tmp_path)
    job_file, gate = tmp_path / "gated.py", tmp_path / "gate"
    job_file.write_text(GATED_COUNT, encoding="utf-8")
    job_id = client.submit(job_file, [source, str(gate)], restart_strategy=RESTARTS)
    producers, _ = wait_for(lambda: _consumers_running(client, job_id), 180,
                            "every producer finished and every consumer running")
    cut_off = max(cluster.taskmanagers, key=lambda t: list(producers.values()).count(t.id))
    lost = sorted(a for a, host in producers.items() if host == cut_off.id)
    kept = sorted(a for a, host in producers.items() if host != cut_off.id)
    machine = cluster.machine_of(cut_off)
    machine.cut()
    try:
        cut_at = time.monotonic()
        gate.touch()
        result = wait_result(client, job_id, LOST_PARTITIONS_BOUND)
        took = time.monotonic() - cut_at
    finally:
        machine.heal()
    assert result.status is JobStatus.FINISHED, _why(result)
    assert {word: count for word, count in collected_rows(result)} == dict(expected)
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    causes = {f.attempt_id: f.failure.message for f in snapshot.graph.failures}
    assert all(f"{PARTITIONS_LOST_WITH} {cut_off.id}" in causes.get(a, "") for a in lost), \
        (took, causes)
    assert not any(f.failure.exception_type == "PartitionNotFound"
                   for f in snapshot.graph.failures), causes
    producer = snapshot.graph.vertices[0]
    assert sorted(s.attempts[0].attempt_id for s in producer.subtasks
                  if len(s.attempts) == 1) == kept
    _wait_back_with_free_slots(cluster, cut_off)


def test_a_taskmanager_cut_off_mid_fetch_ends_its_tasks_within_the_bound(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """Its consumers fetch a big partition over a slow link when it is cut off silently:
    each of them ends (its own log says so, read while the cut lasts) within the fetch's
    bound rather than hang on the silent peer, the job finishes exactly on the other
    TaskManager, and after the heal it is back with every slot free."""
    job_file = tmp_path / "big.py"
    job_file.write_text(BIG_EXCHANGE, encoding="utf-8")
    cut_off = cluster.taskmanagers[0]
    machine = cluster.machine_of(cut_off)
    machine.throttle("512kbit")
    try:
        job_id = client.submit(job_file, [str(BIG_RECORDS)], restart_strategy=RESTARTS)
        work_dir = cluster.local.cluster_dir / "work" / job_id
        fetching = wait_for(lambda: _fetching(client, job_id, cut_off, work_dir), 240,
                            f"a consumer on {cut_off.id} half way through a fetch")
        machine.cut()
        try:
            cut_at = time.monotonic()
            wait_for(lambda: _ended_in_log(cut_off, fetching), MID_FETCH_END_BOUND,
                     f"{fetching} to end on {cut_off.id}, cut off mid-fetch")
            ended_after = time.monotonic() - cut_at
            result = wait_result(client, job_id, 180)
        finally:
            machine.heal()
    finally:
        machine.unthrottle()
    assert result.status is JobStatus.FINISHED, _why(result)
    counts = collections.Counter(i % 8 for i in range(BIG_RECORDS))
    assert {key: total for key, total in collected_rows(result)} == {
        key: 512 * n for key, n in counts.items()}
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    assert {_host(s.attempts[-1]) for v in snapshot.graph.vertices
            for s in v.subtasks} == {t.id for t in cluster.taskmanagers} - {cut_off.id}, \
        ended_after
    _wait_back_with_free_slots(cluster, cut_off)


def _fetching(client: JobClient, job_id: str, taskmanager: NamespacedTaskManager,
              work_dir: Path) -> list[str]:
    """The consumer attempts running on ``taskmanager`` whose input is arriving there now
    (the hidden partial copy of a partition's file is on its disk: the client's reads
    fill it a megabyte at a time, so it may still be empty); [] while none is."""
    try:
        partials = list(taskmanager.sees(work_dir / "partitions").rglob("__part=*/.*.part"))
    except FileNotFoundError:  # a producer's Spark removed a _temporary folder meanwhile
        return []
    snapshot = client.snapshot(job_id, timeout=5.0) if partials else None
    if snapshot is None:
        return []
    consumer = snapshot.graph.vertices[1]  # the rebalanced map, a partition per subtask
    parts = {int(path.parent.name.removeprefix("__part=")) for path in partials
             if path.parent.parent.name.startswith(f"{consumer.id}.")}
    return [s.attempts[-1].attempt_id for s in consumer.subtasks
            if s.subtask in parts and s.state is ExecutionState.RUNNING
            and _host(s.attempts[-1]) == taskmanager.id]


def _ended_in_log(taskmanager: NamespacedTaskManager, attempts: list[str]) -> bool:
    log = taskmanager.log.read_text(errors="replace")
    return all(re.search(rf"attempt {re.escape(a)} (failed|canceled)", log) for a in attempts)


def _wait_back_with_free_slots(cluster: Cluster, taskmanager: NamespacedTaskManager) -> None:
    """After a heal: registered again, and no slot held by a task of the cut."""
    def back() -> bool:
        info = cluster.watcher.taskmanager(taskmanager.id)
        return (info is not None and info.state is p.TaskManagerState.REGISTERED
                and info.slots_total > 0 and info.slots_free == info.slots_total)
    wait_for(back, 90, f"{taskmanager.id} registered again with every slot free")


# A streaming job of one vertex (rate source, a map, the two-phase file sink) whose map
# notes on its machine when each batch passed, for the test to see a stale attempt still
# writing after its TaskManager was declared lost.
NOTED_STREAM = '''
import os, time

def build(env):
    out, count, rate = env.args[0], int(env.args[1]), float(env.args[2])
    env.set_job_name("noted rate to files").set_parallelism(2)
    env.enable_checkpointing(0.5)

    def noted(records):
        with open(os.path.join(os.environ["HOME"], "sunk"), "a") as notes:
            notes.write(f"{time.time()}\\n")
        return [str(index) for index, _key in records]

    env.rate_source(rate, count).map_batches(noted).write_text(out)
'''
STREAM_RECORDS, STREAM_RATE = 9000, 300.0  # 30 s of records, two subtasks


def test_a_stale_streaming_attempt_writing_after_the_heal_commits_nothing(
        cluster: Cluster, client: JobClient, tmp_path: Path) -> None:
    """A streaming job's file sink subtasks run on a TaskManager that is cut off: it is
    declared lost, they run again from the latest checkpoint on the other one, and the cut
    lasts while the stale attempts go on writing there and the new ones commit. Healed,
    the stale attempts are cancelled, and the committed output holds every record once:
    nothing they wrote after the loss (records the new attempts wrote again) is
    committed."""
    for taskmanager in cluster.taskmanagers:
        _wait_back_with_free_slots(cluster, taskmanager)
    job_file, out = tmp_path / "noted.py", tmp_path / "out"
    job_file.write_text(NOTED_STREAM, encoding="utf-8")
    job_id = client.submit(job_file, [str(out), str(STREAM_RECORDS), str(STREAM_RATE)],
                           restart_strategy=RESTARTS)
    wait_for(lambda: len(_committed_lines(out)) >= 300, 180, "a checkpoint committed")
    snapshot = client.snapshot(job_id)
    assert snapshot is not None
    subtasks = snapshot.graph.vertices[0].subtasks
    cut_off = next(t for t in cluster.taskmanagers if t.id == _host(subtasks[0].attempts[-1]))
    stale = sorted(s.attempts[-1].attempt_id for s in subtasks
                   if _host(s.attempts[-1]) == cut_off.id)
    notes = cut_off.sees(cut_off.own / "home" / "sunk")
    machine = cluster.machine_of(cut_off)
    machine.cut()
    try:
        cut_at = time.monotonic()
        wait_for(lambda: _lost(cluster.watcher, cut_off.id), 30, f"{cut_off.id} lost")
        lost_after, lost_at = time.monotonic() - cut_at, time.time()
        replaced = wait_for(lambda: _replaced_elsewhere(client, job_id, stale, cut_off), 60,
                            f"{stale} running again elsewhere")
        committed_then = len(_committed_lines(out))
        wait_for(lambda: len(_committed_lines(out)) > committed_then + 300, 60,
                 "the new attempts committing")
        wait_for(lambda: _last_note(notes) > max(lost_at + 2.0, time.time() - 1.0), 15,
                 f"{stale} still writing on {cut_off.id}, after its loss")
    finally:
        machine.heal()
    healed_at = time.monotonic()
    wait_for(lambda: _ended_in_log(cut_off, stale), 60, f"{stale} cancelled after the heal")
    ended_after = time.monotonic() - healed_at
    result = wait_result(client, job_id, 180)
    assert result.status is JobStatus.FINISHED, _why(result)
    lines = _committed_lines(out)
    assert sorted(map(int, lines)) == list(range(STREAM_RECORDS)), \
        (len(lines), len(set(lines)))
    print(f"stale streaming attempts {stale}: lost {lost_after:.1f} s after the cut, "
          f"replaced by {replaced}, cancelled {ended_after:.1f} s after the heal")


def _committed_lines(folder: Path) -> list[str]:
    return [line for path in folder.iterdir() if path.name.startswith("part-")
            for line in path.read_text().splitlines()] if folder.is_dir() else []


def _replaced_elsewhere(client: JobClient, job_id: str, stale: list[str],
                        taskmanager: NamespacedTaskManager) -> list[str] | None:
    """Once every subtask runs a new attempt elsewhere than ``taskmanager``, their ids."""
    snapshot = client.snapshot(job_id, timeout=5.0)
    if snapshot is None:
        return None
    current = [s.attempts[-1] for s in snapshot.graph.vertices[0].subtasks]
    if any(a.attempt_id in stale or a.state is not ExecutionState.RUNNING
           or _host(a) == taskmanager.id for a in current):
        return None
    return [a.attempt_id for a in current]


def _last_note(notes: Path) -> float:
    try:
        return float(notes.read_text().split()[-1])
    except (FileNotFoundError, IndexError, ValueError):
        return 0.0
