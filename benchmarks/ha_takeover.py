"""Standby JobManagers (docs/ha.md): takeover time, and what high availability costs a submit.

For each ``ha.mode`` a LocalCluster (broker, 2 TaskManagers x 2 slots, Spark eager; two
JobManagers with ``local`` and ``zookeeper``, the second with the cluster's own ZooKeeper
server) is warmed up, then:

- submit latency: the same tiny job (``from_range(0, 10).collect()``) submitted N times, one
  after the other, from just before ``submit()`` to its first RUNNING event here (the
  measurement of benchmarks/submit_latency.py);
- takeover (``local`` and ``zookeeper``), K rounds: SIGKILL of the leading JobManager, then
  from the kill to the new leader's record seen by a client, to the new leader answering
  ``status`` (a ClusterOverview of its epoch), and to a task deployed by it (the first
  RUNNING event of a job submitted once ``status`` answered). Before the next round the
  killed JobManager, started again by its supervisor, must stand by.

Targets (issue 36): takeover ``local`` < 1 s, ``zookeeper`` < 3 s (session timeout 2 s).

    python -m benchmarks.ha_takeover [--quick] [--runs N] [--rounds K]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    LoadMeter,
    exit_on_sigterm,
    machine_summary,
    markdown_table,
    median,
    percentile,
    poll,
)
from benchmarks.submit_latency import (
    TINY_JOB,
    BenchCluster,
    bench_cluster,
    is_running,
    one_submission,
    write_job,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.rpc import RpcError

MODES = ("none", "local", "zookeeper")
TARGET_S = {"local": 1.0, "zookeeper": 3.0}


@dataclass(frozen=True)
class Takeover:
    record_s: float    # the new leader's record seen by the client
    status_s: float    # the new leader answered status
    deployed_s: float  # a task of a job submitted to it RUNNING


def overview(bench: BenchCluster) -> p.ClusterOverview | None:
    try:
        return bench.client.cluster_overview(timeout=2.0)
    except RpcError:
        return None


def one_takeover(bench: BenchCluster, job: Path) -> Takeover:
    poll(lambda: (o := overview(bench)) and len(o.standbys) == 1, 120.0, "standby")
    old = bench.client.leader(30.0)
    killed = time.monotonic()
    os.kill(old.pid, signal.SIGKILL)
    new = poll(lambda: (lead := bench.client.leader(30.0)).epoch > old.epoch and lead, 60.0,
               "new leader record")
    record = time.monotonic()
    poll(lambda: (o := overview(bench)) and o.leader_epoch == new.epoch, 60.0,
         "status from the new leader")
    status = time.monotonic()
    job_id = bench.client.submit(job)
    arrived, _ = bench.events.first(job_id, is_running, 120.0, "RUNNING event")
    bench.events.forget(job_id)
    return Takeover(record - killed, status - killed, arrived - killed)


@dataclass(frozen=True)
class ModeResult:
    mode: str
    running_ms: list[float]
    takeovers: list[Takeover]


def measure(mode: str, runs: int, rounds: int) -> ModeResult:
    settings = {"ha.mode": mode, "jobmanager.count": 1 if mode == "none" else 2,
                "supervisor.restart-backoff": 0.1}
    with bench_cluster(f"ha-{mode}", **settings) as bench:
        bench.warm_up()
        job = write_job(bench.jobs_dir, "tiny", TINY_JOB)
        one_submission(bench, job)  # this client's first submit: imports, first upload
        running = [one_submission(bench, job).running_ms for _ in range(runs)]
        print(f"  {mode}: first RUNNING p50 {median(running):.1f} ms", file=sys.stderr)
        takeovers = []
        for index in range(rounds if mode != "none" else 0):
            takeover = one_takeover(bench, job)
            print(f"  {mode} takeover {index + 1}: record {takeover.record_s:.3f} s, status "
                  f"{takeover.status_s:.3f} s, task deployed {takeover.deployed_s:.3f} s",
                  file=sys.stderr)
            takeovers.append(takeover)
    return ModeResult(mode, running, takeovers)


def report(results: list[ModeResult], load: str, runs: int, rounds: int) -> str:
    def spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
        return f"{median(values) * scale:.{digits}f} ({min(values) * scale:.{digits}f}" \
               f"-{max(values) * scale:.{digits}f})"
    latency = [(r.mode, f"{median(r.running_ms):.1f}", f"{percentile(r.running_ms, 0.95):.1f}",
                f"{min(r.running_ms):.1f}", f"{max(r.running_ms):.1f}") for r in results]
    takeover = []
    for r in results:
        if not r.takeovers:
            continue
        deployed = [t.deployed_s for t in r.takeovers]
        met = "met" if max(t.status_s for t in r.takeovers) < TARGET_S[r.mode] else "missed"
        takeover.append((r.mode, spread([t.record_s for t in r.takeovers]),
                         spread([t.status_s for t in r.takeovers]), spread(deployed),
                         f"< {TARGET_S[r.mode]:g} s: {met}"))
    return "\n".join([
        f"Machine: {machine_summary()}.",
        f"2 TaskManagers x 2 slots, spark.start eager, broker auto; two JobManagers with "
        f"local and zookeeper (session timeout 2 s, the cluster's own ZooKeeper). {runs} "
        f"submissions of `from_range(0, 10).collect()` per mode, {rounds} takeovers per "
        "mode with an election.",
        "",
        "Submit to first RUNNING event, ms:",
        "",
        markdown_table(["ha.mode", "p50", "p95", "min", "max"], latency),
        "",
        "SIGKILL of the leader to ..., seconds, median (min-max):",
        "",
        markdown_table(["ha.mode", "new leader record", "`status` answered",
                        "a task deployed", "target (status)"], takeover),
        "",
        f"CPU busy / load during the run: {load}.",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ha_takeover",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 submissions, 2 takeovers")
    parser.add_argument("--runs", type=int, help="submissions per mode (default 20)")
    parser.add_argument("--rounds", type=int, help="takeovers per mode (default 5)")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    runs = args.runs or (5 if args.quick else 20)
    rounds = args.rounds or (2 if args.quick else 5)
    meter = LoadMeter()
    results = [measure(mode, runs, rounds) for mode in MODES]
    print(report(results, meter.stop().describe(), runs, rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
