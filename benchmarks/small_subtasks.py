"""Many small subtasks: 1,000 one-row subtasks against plain PySpark and Dask (issue 34).

The same small work three ways, in one run, one system after the other so that no two
share the machine's cores:

- clusterdeck: a warm LocalCluster (2 TaskManagers x 2 slots, broker auto, Spark eager,
  as control_plane), a job ``env.set_parallelism(n)``, ``env.from_range(0, n)``
  ``.map(lambda x: f"row {x}").write_text(out)``: one vertex of n chained subtasks, one
  row each. A job of 50 such subtasks warms the cluster first, untimed. Timed from the
  ``submit`` call to the JobResult FINISHED in hand; the output must hold exactly n rows.
  CPU seconds of every process during each job, each TaskManager split into its Python
  process and its Spark JVM (with the JVM's Python workers): what a subtask costs where.
- plain PySpark, in a fresh process: ``local[4]``, default settings otherwise;
  ``sc.parallelize(range(n), n).map(lambda x: f"row {x}").saveAsTextFile(out)`` as one
  job, the session started and one small job of the same shape run before the clock.
- ``dask.distributed``, in a fresh process: a LocalCluster of 2 worker processes x 2
  threads (as task_peers) started before the clock; n tasks that each write a one-line
  file, submitted at once and gathered.

With ``--control-plane`` the warm cluster also runs control_plane's job of 2,000 empty
subtasks (no Spark work; 200 with ``--quick``), to show the control plane alone stays at
its rate while the subtasks' Spark work gets cheaper.

Targets: clusterdeck's subtasks/s >= plain PySpark's tasks/s and >= half of Dask's; the
control plane alone >= 2,000 subtasks/s. The report is a Markdown section for
docs/benchmarks.md.

    python -m benchmarks.small_subtasks [--quick] [--subtasks N] [--runs R] [--slots S]
        [--control-plane] [--no-peers]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import control_plane
from benchmarks._harness import (
    REPO_ROOT,
    LoadMeter,
    exit_on_sigterm,
    machine_summary,
    markdown_table,
    median,
)
from benchmarks.submit_latency import BenchCluster, bench_cluster, write_job
from benchmarks.task_peers import measure
from clusterdeck.core.protocol.states import ExecutionState, JobStatus

SMALL_JOB = """\
def build(env):
    n, out = int(env.args[0]), env.args[1]
    env.set_job_name("small-subtasks")
    env.set_parallelism(n)
    env.from_range(0, n).map(lambda x: f"row {x}").write_text(out)
"""
WARMUP_SUBTASKS = 50
CONTROL_PLANE_SUBTASKS = 2000  # as issue 34 measured the control plane alone
PYSPARK_TARGET = 1.0   # clusterdeck / plain PySpark, at least
DASK_TARGET = 0.5      # clusterdeck / Dask, at least: within 2x
CONTROL_PLANE_TARGET = 2000.0

PYSPARK = """
import json, sys, tempfile, time
from pathlib import Path
from pyspark.sql import SparkSession
n, rounds = int(sys.argv[1]), int(sys.argv[2])
spark = SparkSession.builder.master("local[4]").appName("small-tasks").getOrCreate()
sc = spark.sparkContext
times = []
with tempfile.TemporaryDirectory() as scratch:
    sc.parallelize(range(4), 4).map(lambda x: f"row {x}").saveAsTextFile(f"{scratch}/warm")
    for index in range(rounds):
        out = Path(scratch, f"out-{index}")
        started = time.perf_counter()
        sc.parallelize(range(n), n).map(lambda x: f"row {x}").saveAsTextFile(str(out))
        times.append(time.perf_counter() - started)
        rows = sum(len(part.read_text().splitlines()) for part in out.glob("part-*"))
        assert rows == n, f"PySpark wrote {rows} rows, not {n}"
spark.stop()
print(json.dumps(times))
"""

DASK = """
import json, sys, tempfile, time
from pathlib import Path
from dask.distributed import Client, LocalCluster
def write_line(i, folder):
    Path(folder, f"part-{i:05d}").write_text(f"row {i}\\n")
    return 1
n, rounds = int(sys.argv[1]), int(sys.argv[2])
times = []
with tempfile.TemporaryDirectory() as scratch, LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True,
        dashboard_address=None) as cluster, Client(cluster) as client:
    Path(scratch, "warm").mkdir()
    client.gather(client.map(write_line, range(10), folder=f"{scratch}/warm", pure=False))
    for index in range(rounds):
        out = Path(scratch, f"out-{index}")
        out.mkdir()
        started = time.perf_counter()
        assert sum(client.gather(client.map(write_line, range(n), folder=str(out),
                                            pure=False))) == n
        times.append(time.perf_counter() - started)
        rows = sum(len(part.read_text().splitlines()) for part in out.glob("part-*"))
        assert rows == n, f"Dask wrote {rows} rows, not {n}"
print(json.dumps(times))
"""

PEERS = {"plain PySpark `local[4]`, one job": PYSPARK,
         "dask.distributed (2 workers x 2 threads)": DASK}


@dataclass
class Run:
    """One timed job of small subtasks on the warm cluster."""

    subtasks: int
    wall_s: float        # submit call -> FINISHED JobResult in hand
    span_s: float        # the JobManager's first SCHEDULED -> last FINISHED
    rows: int            # lines in the job's output
    with_splits: int     # subtasks that read an input split (did Spark work)
    cpu: dict[str, float]
    load: str

    @property
    def rate(self) -> float:
        return self.subtasks / self.wall_s


def output_rows(folder: Path) -> int:
    return sum(len(part.read_text(encoding="utf-8").splitlines())
               for part in folder.glob("part-*"))


def one_run(bench: BenchCluster, job: Path, subtasks: int) -> Run:
    out = bench.jobs_dir / f"out-{time.monotonic_ns()}"
    meter = LoadMeter()
    before = control_plane.cpu_snapshot(bench)
    job_id, result, wall = bench.run_job(job, (str(subtasks), str(out)), timeout=3600.0)
    after = control_plane.cpu_snapshot(bench)
    load = meter.stop().describe()
    if result.status != JobStatus.FINISHED:
        raise RuntimeError(f"job {job_id} ended {result.status}: {result.root_cause}")
    time.sleep(0.5)  # the last events are published just before the result
    events = bench.events.executions(job_id)
    span = (max(e.at for e in events if e.new == ExecutionState.FINISHED)
            - min(e.at for e in events if e.new == ExecutionState.SCHEDULED))
    bench.events.forget(job_id)
    readers = control_plane.attempts_with_splits(bench.cluster.cluster_id, job_id)
    return Run(subtasks, wall, span, output_rows(out), len(readers),
               {name: after[name] - before.get(name, 0.0) for name in after}, load)


@dataclass
class Clusterdeck:
    """clusterdeck's side of the run."""

    runs: list[Run]
    broker: str
    slots: int                  # per TaskManager
    warm_up: Run
    empty: control_plane.Run | None  # control_plane's job of empty subtasks, if asked for


def measure_clusterdeck(subtasks: int, count: int, slots: int,
                        empty_subtasks: int) -> Clusterdeck:
    """The warm-up job, ``count`` timed jobs of ``subtasks``, then (``empty_subtasks`` >
    0) control_plane's job of that many empty subtasks, all on one warm cluster."""
    runs = []
    empty = None
    with bench_cluster("small", **{"taskmanager.slots": slots}) as bench:
        job = write_job(bench.jobs_dir, "small_subtasks", SMALL_JOB)
        warm_up = one_run(bench, job, min(WARMUP_SUBTASKS, subtasks))
        print(f"  warm-up: {warm_up.subtasks} subtasks in {warm_up.wall_s:.1f} s",
              file=sys.stderr)
        for index in range(count):
            run = one_run(bench, job, subtasks)
            print(f"  run {index + 1}: {run.subtasks} subtasks in {run.wall_s:.1f} s = "
                  f"{run.rate:.1f}/s, {run.rows} rows", file=sys.stderr)
            runs.append(run)
        if empty_subtasks:
            many = write_job(bench.jobs_dir, "many_subtasks", control_plane.MANY_JOB)
            empty = control_plane.one_run(bench, many, empty_subtasks, "text", 0)
            print(f"  control plane: {empty.subtasks} empty subtasks at {empty.rate:.0f}/s",
                  file=sys.stderr)
        return Clusterdeck(runs, bench.cluster.broker_kind, slots, warm_up, empty)


@dataclass
class Peer:
    rates: list[float] | str  # tasks per second in each round, or why not measured
    load: str                 # CPU busy / load over the peer's whole process


def peer_rates(tasks: int, rounds: int) -> dict[str, Peer]:
    peers = {}
    for name, code in PEERS.items():
        meter = LoadMeter()
        times = measure(code, tasks, rounds)
        rates = times if isinstance(times, str) else [tasks / t for t in times]
        peers[name] = Peer(rates, meter.stop().describe())
        print(f"  {name}: {rates}", file=sys.stderr)
    return peers


def source_revision() -> str:
    """The commit measured, and whether the working tree had changes on top of it."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=False)
        return done.stdout.strip() if done.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" with uncommitted changes" if git("status", "--porcelain") else "")


def verdict(ratio: float | None, target: float) -> str:
    if ratio is None:
        return "not measured"
    return f"{ratio:.2f}x: **{'met' if ratio >= target else 'missed'}**"


def report(measured: Clusterdeck, peers: dict[str, Peer]) -> str:
    runs, empty = measured.runs, measured.empty
    n = runs[0].subtasks
    rate = median([run.rate for run in runs])
    rows = [("clusterdeck, one job on a warm cluster",
             ", ".join(f"{run.rate:.1f}" for run in runs), f"**{rate:.1f}**",
             ", ".join(run.load for run in runs))]
    ratios: dict[str, float | None] = {}
    for name, peer in peers.items():
        if isinstance(peer.rates, str):
            rows.append((name, peer.rates, "", peer.load))
            ratios[name] = None
        else:
            rows.append((name, ", ".join(f"{r:.1f}" for r in peer.rates),
                         f"**{median(peer.rates):.1f}**", peer.load))
            ratios[name] = rate / median(peer.rates)
    pyspark, dask = (ratios.get(name) for name in PEERS)
    lines = [
        f"### Many small subtasks against plain PySpark and Dask (`small_subtasks`, "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)",
        "",
        f"Machine: {machine_summary()}. Source: commit {source_revision()}.",
        f"clusterdeck: broker {measured.broker}, 2 TaskManagers x {measured.slots} slots, "
        f"spark.start eager, warm (a warm-up job of {measured.warm_up.subtasks} subtasks took "
        f"{measured.warm_up.wall_s:.1f} s); `set_parallelism({n})`, `from_range(0, {n})"
        f".map(...).write_text(...)`: {n} one-row subtasks chained in one vertex, timed from "
        "`submit` to the FINISHED JobResult. The peers each in a fresh process, their "
        "session or cluster started before the clock, timed from submit to all done (their "
        "CPU busy / load is over the whole process). "
        "Every round's output checked: exactly one row per (sub)task.",
        "",
        markdown_table([f"{n} small (sub)tasks, one job each round", "(sub)tasks/s per round",
                        "median round", "CPU busy / load"], rows),
        "",
        f"- clusterdeck / PySpark (target >= {PYSPARK_TARGET:.1f}x): "
        f"{verdict(pyspark, PYSPARK_TARGET)}",
        f"- clusterdeck / Dask (target within 2x, >= {DASK_TARGET:.1f}x): "
        f"{verdict(dask, DASK_TARGET)}",
    ]
    if empty is not None:
        met = "met" if empty.rate >= CONTROL_PLANE_TARGET else "missed"
        lines.append(f"- the control plane alone (control_plane's job of {empty.subtasks} empty "
                     f"subtasks on the same cluster, first SCHEDULED to last FINISHED; target "
                     f">= {CONTROL_PLANE_TARGET:,.0f}/s): {empty.rate:,.0f}/s: **{met}**")
    lines += [
        "",
        "clusterdeck's runs: output rows, subtasks that read an input split, the "
        "JobManager's first SCHEDULED to last FINISHED:",
        "",
        markdown_table(["run", "rows written", "subtasks that read a split",
                        "SCHEDULED -> FINISHED (s)", "submit -> result (s)"],
                       [(index + 1, f"{run.rows} of {run.subtasks}"
                         + ("" if run.rows == run.subtasks else " **wrong**"),
                         run.with_splits, f"{run.span_s:.1f}", f"{run.wall_s:.1f}")
                        for index, run in enumerate(runs)]),
        "",
        "CPU during each job, per process (a TaskManager's Python process apart from its "
        "Spark JVM with the JVM's Python workers):",
        "",
        markdown_table(["run", "process", "CPU s", "ms per subtask"], cpu_rows(runs)),
    ]
    return "\n".join(lines)


def cpu_rows(runs: list[Run]) -> list[tuple[int, str, str, str]]:
    """Per run: the JobManager, the broker, each TaskManager's Python process and Spark
    JVM, and all of them together."""
    rows = []
    for index, run in enumerate(runs):
        parts = [("JobManager", run.cpu["jobmanager"]), ("broker", run.cpu["broker"])]
        for name in sorted(key.removesuffix(" py") for key in run.cpu if key.endswith(" py")):
            python = run.cpu[f"{name} py"]
            parts += [(f"{name} Python process", python),
                      (f"{name} Spark JVM and workers", run.cpu[name] - python)]
        parts.append(("**all**", sum(seconds for _, seconds in parts)))
        rows += [(index + 1, what, f"{seconds:.1f}", f"{1000 * seconds / run.subtasks:.0f}")
                 for what, seconds in parts]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.small_subtasks",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 subtasks, one run")
    parser.add_argument("--subtasks", type=int, help="subtasks (default 1000, quick 200)")
    parser.add_argument("--runs", type=int, help="jobs (and peer rounds), default 2")
    parser.add_argument("--slots", type=int, default=2, help="slots per TaskManager (2)")
    parser.add_argument("--control-plane", action="store_true",
                        help="also control_plane's job of empty subtasks on the cluster")
    parser.add_argument("--no-peers", action="store_true", help="skip PySpark and Dask")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    subtasks = args.subtasks or (200 if args.quick else 1000)
    count = args.runs or (1 if args.quick else 2)
    empty = (200 if args.quick else CONTROL_PLANE_SUBTASKS) if args.control_plane else 0
    ours = measure_clusterdeck(subtasks, count, args.slots, empty)
    peers = {} if args.no_peers else peer_rates(subtasks, count)
    print(report(ours, peers))
    return 0 if all(run.rows == run.subtasks for run in ours.runs) else 1


if __name__ == "__main__":
    sys.exit(main())
