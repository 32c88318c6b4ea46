"""Start-up: from ``clusterdeck up --taskmanagers 2 --slots 2`` to every TaskManager registered.

Each run starts ``clusterdeck up`` as a subprocess (``python -m clusterdeck.core.cli up``, what the
``clusterdeck`` script runs) for a new cluster, and times, from just before the process
is started:

- broker ready: the broker's connection file exists and it accepts a login (polled by
  this process, so it may lag by up to 0.2 s);
- leader: the JobManager's retained ``state/leader`` (its own ``started_at``);
- first / all TaskManagers registered: ``registered_at`` of each TaskManager in the
  retained ``state/cluster`` snapshot (the JobManager's clock when it registered them);
- snapshot seen: arrival here of the first snapshot with both registered;
- ``up`` reports: ``clusterdeck up`` printing "cluster running" (its own watcher saw them).

Then ``clusterdeck status --json`` is run once as a check (and timed), and ``up`` is
stopped with Ctrl-C (SIGINT), timing its shutdown.

    python -m benchmarks.startup [--quick] [--kinds mosquitto amqtt] [--runs N]
        [--spark-start eager lazy]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    REPO_ROOT,
    Children,
    LoadMeter,
    child_env,
    exit_on_sigterm,
    fresh_home,
    kinds_to_run,
    machine_summary,
    markdown_table,
    median,
    python_module,
)
from benchmarks._observer import LEADER, ClusterObserver
from clusterdeck.broker.connection import client_address, read_connection
from clusterdeck.broker.server import wait_ready
from clusterdeck.core.config import paths
from clusterdeck.core.protocol import messages as p

TASKMANAGERS = {"taskmanager-1", "taskmanager-2"}
READY_LINE = b"cluster running"


@dataclass(frozen=True)
class Run:
    kind: str
    spark_start: str
    broker_ready_s: float
    leader_s: float
    first_registered_s: float
    all_registered_s: float
    snapshot_seen_s: float
    up_reported_s: float
    status_s: float
    status_ok: bool
    shutdown_s: float
    load: str


class LineTimes:
    """Stamps each line a child writes to a pipe (on a reader thread of its own)."""

    def __init__(self, pipe: object, log: Path) -> None:
        self.first_seen: dict[bytes, float] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(pipe, log), daemon=True)
        self._thread.start()

    def _read(self, pipe: object, log: Path) -> None:
        with open(log, "ab") as out:
            for line in iter(pipe.readline, b""):  # type: ignore[attr-defined]
                now = time.monotonic()
                out.write(line)
                with self._lock:
                    self.first_seen.setdefault(line.strip(), now)

    def when(self, fragment: bytes) -> float | None:
        with self._lock:
            return min((t for line, t in self.first_seen.items() if fragment in line),
                       default=None)


def one_run(children: Children, kind: str, spark_start: str, index: int,
            timeout: float = 90.0) -> Run:
    cluster_id = f"bench-up-{kind}-{spark_start}-{index}"
    cluster_dir = paths.cluster_dir(cluster_id)
    meter = LoadMeter()
    wall_start, start = time.time(), time.monotonic()
    up = children.start(f"up-{cluster_id}", python_module(
        "clusterdeck.core.cli", "up", "--taskmanagers", "2", "--slots", "2", "--broker", kind,
        "-D", f"cluster.id={cluster_id}", "-D", f"spark.start={spark_start}"),
        stderr=subprocess.PIPE)
    lines = LineTimes(up.stderr, children.log_dir / f"up-{cluster_id}.stderr.log")
    deadline = start + timeout
    observer = None
    try:
        while read_connection(cluster_dir) is None:
            _check_alive(up, deadline)
            time.sleep(0.01)
        address = client_address(cluster_dir, cluster_id, "client")
        wait_ready(address, deadline - time.monotonic())
        broker_ready = time.monotonic() - start
        observer = ClusterObserver(address, cluster_id, connect_timeout=30.0)
        seen = observer.wait_registered(TASKMANAGERS, deadline - time.monotonic())
        overview = observer.latest
        assert overview is not None
        _, leader = observer.first(LEADER, lambda m: isinstance(m, p.LeaderInfo), 0.0,
                                   10.0, "the leader")
        registered = sorted(t.registered_at for t in overview.taskmanagers
                            if t.id in TASKMANAGERS)
        while lines.when(READY_LINE) is None:
            _check_alive(up, deadline)
            time.sleep(0.01)
        up_reported = lines.when(READY_LINE)
        assert up_reported is not None
        status_s, status_ok = run_status(cluster_id)
    finally:
        if observer is not None:
            observer.close()
    stopping = time.monotonic()
    children.stop(up, grace=30.0, sig=signal.SIGINT)
    shutdown = time.monotonic() - stopping
    return Run(kind, spark_start, broker_ready, leader.started_at - wall_start,
               registered[0] - wall_start, registered[-1] - wall_start, seen - start,
               up_reported - start, status_s, status_ok, shutdown, meter.stop().describe())


def _check_alive(process: subprocess.Popen[bytes], deadline: float) -> None:
    if process.poll() is not None:
        raise RuntimeError(f"clusterdeck up exited with {process.returncode}")
    if time.monotonic() > deadline:
        raise TimeoutError("clusterdeck up did not get ready in time")


def run_status(cluster_id: str) -> tuple[float, bool]:
    """``clusterdeck status --json``: its wall time, and whether it lists both registered."""
    started = time.monotonic()
    result = subprocess.run(python_module("clusterdeck.core.cli", "status", "--json", "-D",
                                          f"cluster.id={cluster_id}"),
                            cwd=REPO_ROOT, env=child_env(), capture_output=True, timeout=60,
                            check=False)
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        return elapsed, False
    document = json.loads(result.stdout)
    live = {t["id"] for t in document["taskmanagers"] if t["state"] == "registered"}
    return elapsed, live >= TASKMANAGERS


def report(runs: list[Run]) -> str:
    rows = [(r.kind, r.spark_start, f"{r.broker_ready_s:.2f}", f"{r.leader_s:.2f}",
             f"{r.first_registered_s:.2f}", f"{r.all_registered_s:.2f}",
             f"{r.snapshot_seen_s:.2f}", f"{r.up_reported_s:.2f}",
             f"{r.status_s:.2f}{'' if r.status_ok else ' (failed)'}", f"{r.shutdown_s:.2f}",
             r.load) for r in runs]
    summary = []
    for kind, spark_start in dict.fromkeys((r.kind, r.spark_start) for r in runs):
        group = [r for r in runs if (r.kind, r.spark_start) == (kind, spark_start)]
        summary.append((kind, spark_start,
                        f"{median([r.all_registered_s for r in group]):.2f}",
                        f"{max(r.all_registered_s for r in group):.2f}",
                        f"{median([r.up_reported_s for r in group]):.2f}"))
    return "\n".join([
        f"Machine: {machine_summary()}.",
        "Seconds from starting `clusterdeck up --taskmanagers 2 --slots 2` (a new cluster "
        "each run).",
        "",
        markdown_table(["broker", "spark.start", "broker ready", "leader", "first TM registered",
                        "all TMs registered", "snapshot seen", "`up` reports ready",
                        "`status --json` took", "shutdown (Ctrl-C)", "CPU busy / load"], rows),
        "",
        markdown_table(["broker", "spark.start", "all registered: median", "max",
                        "`up` reports: median"], summary),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one run per broker")
    parser.add_argument("--kinds", nargs="+", choices=["mosquitto", "amqtt"],
                        help="broker kinds (default: both)")
    parser.add_argument("--runs", type=int, help="runs per broker (default 3, quick 1)")
    parser.add_argument("--spark-start", nargs="+", choices=["eager", "lazy"],
                        default=["eager", "lazy"], help="eager: each TaskManager starts its "
                        "SparkSession (a JVM) as it starts, the default; lazy: at its first "
                        "task (default: both)")
    args = parser.parse_args(argv)
    count = args.runs or (1 if args.quick else 3)
    exit_on_sigterm()
    runs = []
    with fresh_home() as home, Children(home / "logs") as children:
        kinds = kinds_to_run(args.kinds)
        for index in range(count):  # the variants alternate, so background load hits all
            for spark_start in args.spark_start:
                for kind in kinds:
                    run = one_run(children, kind, spark_start, index)
                    print(f"  {kind} spark.start={spark_start} run {index + 1}: all "
                          f"registered after "
                          f"{run.all_registered_s:.2f} s", file=sys.stderr)
                    runs.append(run)
    print(report(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
