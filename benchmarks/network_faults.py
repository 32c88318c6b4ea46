"""Detection and recovery per network or disk fault, and a word count's slowdown over slow
and lossy links (issue 38's benchmark; the cuts' job times are network_cuts.py's).

The setup of tests/integration/test_network_faults.py with default heartbeats (1 s /
6 s) on both sides: this machine plays the JobManager's, its broker on a bridge's
address with TLS; two TaskManagers x 2 slots, each in a network and mount namespace of
its own, their way to the broker through the tests' delay relay. The job is
``examples/wordcount.py`` at parallelism 4 over ``--lines`` generated lines, restart
strategy fixed delay (10 attempts, 1 s). After a warm-up job:

- slowdown: ``--runs`` word counts each on a clean network, with 200 ms each way
  between the TaskManagers and the broker, with 5% of frames lost each way on both
  TaskManagers' links (nftables), and with both; job time = submit to result;
- partition: the first TaskManager cut off silently: declared lost after; healed,
  registered again after;
- one-way data port: the first TaskManager's data port answers nothing until the job
  ends; time from submission to a fetch's failure naming it, and to the result;
- full work dir: the first TaskManager's work dir a full tmpfs; time from submission to
  the first DiskFull failure, and to the job's end;
- the JobManager cut off from the broker for 10 s while consumers wait: time from the
  heal to the result, and whether the producers kept their partitions.

Needs root, iproute2, util-linux, nftables.

    python -m benchmarks.network_faults [--runs 3] [--lines 200000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import machine_summary, markdown_table
from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import running_cluster
from tests.integration.namespaces import namespaced_taskmanagers, wait_registered
from tests.integration.netns import DelayRelay, bridged_machines, process_cut_from
from tests.integration.test_network_cuts import GATED_COUNT, _consumers_running
from tests.integration.test_network_faults import (
    Cluster,
    _data_port,
    _failures,
    filled_work_dir,
    words_file,
)
from tests.waiting import wait_for

WORDCOUNT = Path(__file__).resolve().parent.parent / "examples" / "wordcount.py"
HEARTBEATS = {"heartbeat.interval": 1.0, "heartbeat.timeout": 6.0}
TASKMANAGER = {**HEARTBEATS, "taskmanager.slots": 2, "spark.start": "eager"}
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 10,
            "restart-strategy.fixed-delay.delay": 1.0}
LINKS = {"clean": (0.0, 0), "200 ms": (0.2, 0), "5% loss": (0.0, 5),
         "200 ms + 5% loss": (0.2, 5)}


def word_count(client: JobClient, source: str, truth: dict[str, int]) -> tuple[str, float]:
    started = time.monotonic()
    job_id = client.submit(WORDCOUNT, [source, "4"], restart_strategy=RESTARTS)
    result = client.wait(job_id)
    if result.status is not JobStatus.FINISHED or dict(collected_rows(result)) != truth:
        raise RuntimeError(f"job {job_id} {result.status}: {result.root_cause}")
    return job_id, time.monotonic() - started


def links(cluster: Cluster, delay: float, loss: int) -> None:
    cluster.relay.delay = delay
    for machine in cluster.network.machines:
        machine.lose(loss)


def lost_count(cluster: Cluster) -> int:
    return sum(isinstance(e, p.TaskManagerLost) for e in list(cluster.watcher.events))


def slowdown(cluster: Cluster, client: JobClient, source: str, truth: dict[str, int],
             runs: int) -> list[tuple[str, ...]]:
    rows = []
    clean = None
    for name, (delay, loss) in LINKS.items():
        before = lost_count(cluster)
        links(cluster, delay, loss)
        try:
            times = [word_count(client, source, truth)[1] for _ in range(runs)]
        finally:
            links(cluster, 0.0, 0)
        middle = statistics.median(times)
        clean = clean or middle
        rows.append((name, f"{middle:.1f}", f"{min(times):.1f}-{max(times):.1f}",
                     f"{middle / clean:.2f}x", str(lost_count(cluster) - before)))
        print(f"  {name}: {middle:.1f} s", file=sys.stderr, flush=True)
    return rows


def partition(cluster: Cluster) -> tuple[str, ...]:
    first, machine = cluster.taskmanagers[0], cluster.network.machines[0]

    def state() -> p.TaskManagerState | None:
        info = cluster.watcher.taskmanager(first.id)
        return info.state if info else None
    machine.cut()
    cut_at = time.monotonic()
    try:
        wait_for(lambda: state() is p.TaskManagerState.LOST, 60, "lost")
        lost = time.monotonic() - cut_at
    finally:
        machine.heal()
    healed_at = time.monotonic()
    wait_for(lambda: state() is p.TaskManagerState.REGISTERED, 120, "registered again")
    return ("TaskManager cut off (both ways)", f"declared lost {lost:.1f}",
            f"registered again {time.monotonic() - healed_at:.1f} after the heal", "")


def one_way_port(cluster: Cluster, client: JobClient, source: str,
                 truth: dict[str, int]) -> tuple[str, ...]:
    """The port stays closed until the job ends: its TaskManager blocked for the job,
    the producers run again on the other one."""
    producer, machine = cluster.taskmanagers[0], cluster.network.machines[0]
    machine.close_port(_data_port(producer))
    try:
        started = time.monotonic()
        job_id = client.submit(WORDCOUNT, [source, "4"], restart_strategy=RESTARTS)
        wait_for(lambda: any(producer.id in f.failure.message
                             for f in _failures(client, job_id)), 300, "blamed")
        named = time.monotonic() - started
        result = client.wait(job_id)
        ended = time.monotonic() - started
    finally:
        machine.reopen_port()
    exact = result.status is JobStatus.FINISHED and dict(collected_rows(result)) == truth
    return ("data port silent one way", f"a fetch failed naming it {named:.1f} after submit",
            f"result {ended:.1f} after submit, the port still closed",
            "exact" if exact else result.status.value)


def full_work_dir(cluster: Cluster, client: JobClient, source: str,
                  truth: dict[str, int]) -> tuple[str, ...]:
    full = cluster.taskmanagers[0]
    work = cluster.local.cluster_dir / "work"
    with filled_work_dir(full, work):
        started = time.monotonic()
        job_id = client.submit(WORDCOUNT, [source, "4"], restart_strategy=RESTARTS)
        wait_for(lambda: any(f.failure.exception_type == "DiskFull"
                             for f in _failures(client, job_id)), 300, "DiskFull")
        named = time.monotonic() - started
        result = client.wait(job_id)
        ended = time.monotonic() - started
    exact = result.status is JobStatus.FINISHED and dict(collected_rows(result)) == truth
    return ("a TaskManager's work dir full", f"DiskFull {named:.1f} after submit",
            f"job ended {result.status.value} {ended:.1f} after submit",
            "exact" if exact else result.status.value)


def jobmanager_cut(cluster: Cluster, client: JobClient, folder: Path, source: str,
                   truth: dict[str, int], seconds: float = 10.0) -> tuple[str, ...]:
    job_file, gate = folder / "gated.py", folder / "gate"
    gate.unlink(missing_ok=True)
    job_file.write_text(GATED_COUNT, encoding="utf-8")
    job_id = client.submit(job_file, [source, str(gate)], restart_strategy=RESTARTS)
    producers, _ = wait_for(lambda: _consumers_running(client, job_id), 300, "consumers")
    pid = cluster.local.supervisor.info("jobmanager").pid
    assert pid is not None
    with process_cut_from(pid, cluster.local.broker_address().port):
        time.sleep(seconds)
        gate.touch()
    healed = time.monotonic()
    result = client.wait(job_id)
    snapshot = client.snapshot(job_id)
    kept = snapshot is not None and all(
        s.attempts[-1].attempt_id in producers for s in snapshot.graph.vertices[0].subtasks)
    exact = dict(collected_rows(result)) == truth
    return (f"JobManager cut off from the broker {seconds:g} s", "",
            f"result {time.monotonic() - healed:.1f} after the heal",
            ("exact" if exact else str(result.status.value))
            + (", producers kept" if kept else ", producers ran again"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lines", type=int, default=200_000)
    args = parser.parse_args()
    day = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="faults-") as folder, \
            bridged_machines(2) as network, \
            running_cluster("auto", **{"taskmanager.count": 0, "broker.bind": network.gateway,
                                       **HEARTBEATS}) as (local, watcher):
        relay = DelayRelay(network, local.broker_address().port)
        try:
            with namespaced_taskmanagers(local, 2, Path(folder), TASKMANAGER,
                                         broker_host=network.gateway,
                                         networks=[m.enter for m in network.machines]
                                         ) as taskmanagers:
                wait_registered(watcher, taskmanagers)
                wait_for(lambda: all("SparkSession started" in t.log.read_text()
                                     for t in taskmanagers), 300, "Spark up")
                cluster = Cluster(local, watcher, network, relay, taskmanagers)
                source, truth = words_file(Path(folder), args.lines)
                with JobClient(local.config, connect_timeout=30) as client:
                    word_count(client, source, truth)  # warm-up
                    slow = slowdown(cluster, client, source, truth, args.runs)
                    faults = [partition(cluster),
                              one_way_port(cluster, client, source, truth),
                              full_work_dir(cluster, client, source, truth),
                              jobmanager_cut(cluster, client, Path(folder), source, truth)]
        finally:
            relay.close()
    print(f"{machine_summary()}; {day}; {args.lines} lines, parallelism 4, heartbeats "
          f"1 s / 6 s\n")
    print(markdown_table(("links", "job time s (median)", "range s", "against clean",
                          "TaskManagers declared lost"), slow))
    print()
    print(markdown_table(("fault", "detected (s)", "recovered (s)", "result"), faults))
    return 0


if __name__ == "__main__":
    sys.exit(main())
