"""Job time with a silent network cut of one TaskManager, against the undisturbed job
(issue 41's benchmark).

The setup of tests/integration/test_network_cuts.py, with default heartbeats (1 s / 6 s)
on both sides: this machine plays the JobManager's, its broker binds a bridge's address;
two TaskManagers x 2 slots, each in a network and a mount namespace of its own on the
bridge (tests/integration/netns.py, namespaces.py), Spark started eagerly. The job is
``examples/wordcount.py`` at parallelism 4 over a generated text (``--lines``), restart
strategy fixed delay (10 attempts, 1 s). After a warm-up job, in one run:

- undisturbed;
- for each of ``--cuts`` (default 20 and 150 s): once every producer has finished, the
  TaskManager that ran most of them is cut off silently (nftables drops every frame of
  its link, no RST, no ICMP) for that long, then healed, and it must be registered
  again before the next job.

Job time = submit to result on the client; the table also gives when the JobManager
declared the TaskManager lost after the cut, and checks the counts. Needs root, iproute2,
util-linux and nftables.

    python -m benchmarks.network_cuts [--cuts 20 150] [--lines 200000]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import machine_summary, markdown_table
from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from tests.integration.clusters import ClusterWatcher, running_cluster
from tests.integration.namespaces import (
    NamespacedTaskManager,
    namespaced_taskmanagers,
    wait_registered,
)
from tests.integration.netns import Machine, bridged_machines
from tests.waiting import wait_for

WORDCOUNT = Path(__file__).resolve().parent.parent / "examples" / "wordcount.py"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
HEARTBEATS = {"heartbeat.interval": 1.0, "heartbeat.timeout": 6.0}
TASKMANAGER = {**HEARTBEATS, "taskmanager.slots": 2, "spark.start": "eager"}
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 10,
            "restart-strategy.fixed-delay.delay": 1.0}


@dataclass
class Run:
    cut: float | None
    seconds: float
    lost_after: float | None
    counts_ok: bool


def words_file(folder: Path, lines: int) -> tuple[str, dict[str, int]]:
    path = folder / "words.txt"
    rows = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(i % 9 + 1))
            for i in range(lines)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path.as_uri(), dict(collections.Counter(w for row in rows for w in row.split()))


def producers_done(client: JobClient, job_id: str) -> dict[str, str] | None:
    """Once every producer finished, the TaskManager of each; else None."""
    snapshot = client.snapshot(job_id, timeout=5.0)
    if snapshot is None:
        return None
    producer = snapshot.graph.vertices[0]
    if any(s.state is not ExecutionState.FINISHED for s in producer.subtasks):
        return None
    return {s.attempt_id: s.attempts[-1].slot.taskmanager_id if s.attempts[-1].slot else ""
            for s in producer.subtasks}


def is_lost(watcher: ClusterWatcher, taskmanager_id: str) -> bool:
    info = watcher.taskmanager(taskmanager_id)
    return info is not None and info.state is p.TaskManagerState.LOST


def run(client: JobClient, watcher: ClusterWatcher, machines: dict[str, Machine],
        taskmanagers: list[NamespacedTaskManager], source: str, truth: dict[str, int],
        cut: float | None) -> Run:
    started = time.monotonic()
    job_id = client.submit(WORDCOUNT, [source, "4"], restart_strategy=RESTARTS)
    ended: list[tuple[p.JobResult, float]] = []  # the result, and when it came
    waiter = threading.Thread(target=lambda: ended.append(
        (client.wait(job_id), time.monotonic())), daemon=True)
    waiter.start()
    lost_after = None
    if cut is not None:
        hosts = wait_for(lambda: producers_done(client, job_id), 300, "the producers done")
        victim = max(taskmanagers, key=lambda t: list(hosts.values()).count(t.id))
        machine = machines[victim.id]
        machine.cut()
        cut_at = time.monotonic()
        try:
            wait_for(lambda: is_lost(watcher, victim.id), 60, f"{victim.id} lost")
            lost_after = time.monotonic() - cut_at
            # the cut lasts its length, whether the job ends meanwhile or not
            time.sleep(max(0.0, cut_at + cut - time.monotonic()))
        finally:
            machine.heal()
        wait_for(lambda: victim.id in watcher.registered(), 180,
                 f"{victim.id} registered again")
    waiter.join(900)
    if not ended:
        raise RuntimeError(f"job {job_id} did not end within 900 s")
    result, at = ended[0]
    if result.status is not JobStatus.FINISHED:
        raise RuntimeError(f"job {job_id} {result.status}: {result.root_cause}")
    counts = {word: count for word, count in collected_rows(result)}
    return Run(cut, at - started, lost_after, counts == truth)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=float, nargs="*", default=[20.0, 150.0])
    parser.add_argument("--lines", type=int, default=200_000)
    args = parser.parse_args()
    day = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="cuts-") as folder, \
            bridged_machines(2) as network, \
            running_cluster("auto", **{"taskmanager.count": 0, "broker.bind": network.gateway,
                                       **HEARTBEATS}) as (local, watcher), \
            namespaced_taskmanagers(local, 2, Path(folder), TASKMANAGER,
                                    broker_host=network.gateway,
                                    networks=[m.enter for m in network.machines]
                                    ) as taskmanagers:
        wait_registered(watcher, taskmanagers)
        wait_for(lambda: all("SparkSession started" in t.log.read_text()
                             for t in taskmanagers), 300, "Spark up on both TaskManagers")
        machines = {t.id: m for t, m in zip(taskmanagers, network.machines, strict=True)}
        source, truth = words_file(Path(folder), args.lines)
        with JobClient(local.config, connect_timeout=30) as client:
            run(client, watcher, machines, taskmanagers, source, truth, None)  # warm-up
            for cut in [None, *args.cuts]:
                runs.append(run(client, watcher, machines, taskmanagers, source, truth, cut))
                print(f"  cut {cut}: {runs[-1].seconds:.1f} s", file=sys.stderr, flush=True)
    print(f"{machine_summary()}; {day}; {args.lines} lines, parallelism 4\n")
    print(markdown_table(
        ("silent cut", "job time s", "declared lost after s", "counts"),
        [("none" if r.cut is None else f"{r.cut:g} s", f"{r.seconds:.1f}",
          "" if r.lost_after is None else f"{r.lost_after:.1f}",
          "exact" if r.counts_ok else "WRONG") for r in runs]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
