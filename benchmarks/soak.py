"""Soak: thousands of tiny jobs on one cluster; throughput, JobManager memory and `list`.

A warm LocalCluster (2 TaskManagers x 2 slots, broker auto, Spark eager, retention at its
default of 1,000 ended jobs unless ``--max-jobs`` says otherwise) gets the same tiny job
(``env.from_range(0, 3).collect()``) in waves, IN_FLIGHT jobs at a time from threads of
this process (twice the slots, so a slot never waits for a submission). At each point
(after 0, 1,000 and 3,000 soak jobs by default), with no soak job in flight:

- the JobManager's RSS, threads and open files (psutil), and the broker's RSS (it holds
  the retained snapshots and results until retention clears them);
- ``clusterdeck list --json`` as a subprocess (a whole Python start, a login, every page),
  median of LIST_RUNS runs, and ``JobClient.all_jobs()`` on this process's connected
  client, median of LIST_RUNS;
- one tiny job alone, submitted and waited for LATENCY_JOBS times one after the other:
  median and p95 from ``submit()`` to the JobResult in hand.

Over each wave: jobs per second from its first submission to its last result, the
slowest stretch of STRETCH jobs inside it, the JobManager's peak RSS (sampled every half
second) and its CPU per job.

The peer is plain PySpark ``local[2]`` in a child process, the same work as the tiny job
(``parallelize(range(3)).collect()``): cold (process start to first result, what a
``spark-submit`` of one tiny job costs) and warm (the same session again, median). Plain
PySpark has no throughput of thousands of submissions to compare (each spark-submit is a
JVM start of seconds), so the peer is compared per job only.

    python -m benchmarks.soak [--quick] [--points 0 1000 3000] [--max-jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    Children,
    LoadMeter,
    child_env,
    exit_on_sigterm,
    machine_summary,
    markdown_table,
    median,
    percentile,
    python_module,
)
from benchmarks.submit_latency import BenchCluster, bench_cluster, wait_result, write_job
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus

TINY_JOB = """\
def build(env):
    env.set_job_name("tiny")
    env.from_range(0, 3).collect(name="rows")
"""
IN_FLIGHT = 8  # jobs submitted and not yet ended, from this process's threads
LIST_RUNS = 5
LATENCY_JOBS = 10
STRETCH = 100  # jobs: the slowest such stretch of a wave shows a slowdown inside it
SAMPLE_EVERY = 0.5  # seconds between RSS samples during a wave
JOB_TIMEOUT = 300.0
PLAIN_RUNS = 20


# -- the peer: plain PySpark in a child process ---------------------------------------------


def plain_child(output: str, runs: int, started_wall: float) -> None:
    """Runs in the child: start Spark local[2], collect three numbers ``runs`` times."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("plain-tiny")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    times, cold_s = [], 0.0
    for _ in range(runs):
        t0 = time.monotonic()
        rows = spark.sparkContext.parallelize(range(3), 1).collect()
        times.append(time.monotonic() - t0)
        cold_s = cold_s or time.time() - started_wall  # the first result in hand
        if rows != [0, 1, 2]:
            raise AssertionError(f"plain PySpark collected {rows}")
    Path(output).write_text(json.dumps({"cold_s": cold_s, "runs_s": times}),
                            encoding="utf-8")
    spark.stop()


@dataclass(frozen=True)
class Plain:
    cold_s: float  # process start to the first result
    warm_ms: list[float]


def run_plain(runs: int) -> Plain:
    with tempfile.TemporaryDirectory(prefix="clusterdeck-bench-soak-") as scratch, \
            Children(Path(scratch) / "logs") as children:
        output = Path(scratch) / "plain.json"
        child = children.start("plain-pyspark", python_module(
            "benchmarks.soak", "--plain-child", str(output), str(runs), repr(time.time())))
        code = child.wait()
        if code != 0 or not output.is_file():
            log = (Path(scratch) / "logs" / "plain-pyspark.log").read_text()[-2000:]
            raise RuntimeError(f"plain PySpark exited with {code}:\n{log}")
        result = json.loads(output.read_text(encoding="utf-8"))
    return Plain(result["cold_s"], [1000 * s for s in result["runs_s"][1:]])


# -- clusterdeck -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    soak_jobs: int  # soak jobs run so far (the latency jobs of earlier points not counted)
    stored: int  # jobs the Dispatcher lists (retention keeps at most --max-jobs ended ones)
    jm_rss: int
    jm_threads: int
    jm_files: int
    broker_rss: int
    cli_list_ms: list[float]
    all_jobs_ms: list[float]
    job_ms: list[float]  # one tiny job alone, submit to result
    load: float


@dataclass(frozen=True)
class Wave:
    start: int  # soak jobs before the wave
    jobs: int
    seconds: float
    slowest_stretch: float  # jobs/s of the slowest STRETCH consecutive endings
    peak_rss: int
    jm_cpu_ms_per_job: float
    restarts: int  # attempts that failed and ran again, over the wave's jobs
    load: str


def process(bench: BenchCluster, name: str) -> psutil.Process:
    pid = bench.cluster.supervisor.info(name).pid
    if pid is None:
        raise RuntimeError(f"the {name} is not running")
    return psutil.Process(pid)


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.monotonic()
        fn()
        times.append(1000 * (time.monotonic() - started))
    return times


def cli_list(bench: BenchCluster) -> int:
    """``clusterdeck list --json`` as a user runs it; the number of jobs it printed."""
    done = subprocess.run(python_module("clusterdeck.core.cli", "list", "--cluster",
                                        bench.cluster.cluster_id, "--json"),
                          capture_output=True, text=True, timeout=120, env=child_env())
    if done.returncode != 0:
        raise RuntimeError(f"clusterdeck list exited with {done.returncode}: {done.stderr}")
    return len(json.loads(done.stdout))


def one_job(bench: BenchCluster, job: Path) -> p.JobResult:
    """Thread-safe: one job from its submission to its result."""
    result = wait_result(bench.client, bench.client.submit(job), JOB_TIMEOUT)
    if result.status != JobStatus.FINISHED:
        raise RuntimeError(f"a tiny job ended {result.status}: {result.root_cause}")
    return result


def measure_point(bench: BenchCluster, job: Path, soak_jobs: int) -> Point:
    jobmanager, broker = process(bench, "jobmanager"), process(bench, "broker")
    usage = (jobmanager.memory_info().rss, jobmanager.num_threads(), jobmanager.num_fds(),
             broker.memory_info().rss)  # before this point's own jobs and lists
    stored = bench.client.all_jobs().total
    listed = cli_list(bench)
    if listed != stored:
        raise RuntimeError(f"clusterdeck list printed {listed} jobs, the Dispatcher has "
                           f"{stored}")
    cli_ms = timed(lambda: cli_list(bench), LIST_RUNS)
    all_jobs_ms = timed(bench.client.all_jobs, LIST_RUNS)
    job_ms = timed(lambda: one_job(bench, job), LATENCY_JOBS)
    return Point(soak_jobs, stored, *usage, cli_ms, all_jobs_ms, job_ms, os.getloadavg()[0])


@contextmanager
def in_flight(bench: BenchCluster, job: Path, count: int) -> Iterator[list[Future]]:
    """``count`` jobs, IN_FLIGHT at a time; those not started are dropped on the way out."""
    pool = ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="soak")
    try:
        yield [pool.submit(one_job, bench, job) for _ in range(count)]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def slowest_stretch(started: float, ended_at: list[float]) -> float:
    """Jobs/s of the slowest STRETCH jobs in a row to end (the whole wave if shorter)."""
    times = [started, *ended_at]
    if len(ended_at) < STRETCH:
        return len(ended_at) / max(1e-9, times[-1] - started)
    return min(STRETCH / max(1e-9, times[i + STRETCH] - times[i])
               for i in range(len(times) - STRETCH))


def run_wave(bench: BenchCluster, job: Path, start: int, count: int) -> Wave:
    jobmanager = process(bench, "jobmanager")
    meter = LoadMeter()
    cpu_before = sum(jobmanager.cpu_times()[:2])
    ended_at: list[float] = []  # when the n-th job of the wave was seen ended
    peak = jobmanager.memory_info().rss
    started = time.monotonic()
    with in_flight(bench, job, count) as futures:
        reported = 0
        while len(ended_at) < count:
            time.sleep(SAMPLE_EVERY)  # a sampling period, not a wait for a condition
            done = sum(f.done() for f in futures)
            now = time.monotonic()
            ended_at.extend([now] * (done - len(ended_at)))
            peak = max(peak, jobmanager.memory_info().rss)
            failed = next((f for f in futures if f.done() and f.exception()), None)
            if failed is not None:
                raise RuntimeError("a soak job failed") from failed.exception()
            if done - reported >= 250:
                reported = done
                print(f"  {done}/{count} jobs, {done / (now - started):.1f} jobs/s, JobManager "
                      f"RSS {peak / 2**20:.1f} MiB (peak)", file=sys.stderr)
        results = [f.result() for f in futures]
    seconds = time.monotonic() - started
    cpu = sum(jobmanager.cpu_times()[:2]) - cpu_before
    return Wave(start, count, seconds, slowest_stretch(started, ended_at), peak,
                1000 * cpu / count, sum(r.failures for r in results), meter.stop().describe())


def measure(points: list[int], max_jobs: int) -> tuple[list[Point], list[Wave], str, float]:
    with bench_cluster("soak", **{"jobstore.retention.max-jobs": max_jobs}) as bench:
        warm_up = bench.warm_up()
        job = write_job(bench.jobs_dir, "tiny", TINY_JOB)
        one_job(bench, job)  # this client's first submission: imports, first upload
        measured, waves = [], []
        previous = 0
        for target in points:
            if target > previous:
                print(f"wave {previous} -> {target} jobs", file=sys.stderr)
                waves.append(run_wave(bench, job, previous, target - previous))
                previous = target
            point = measure_point(bench, job, target)
            print(f"  after {target} jobs: JobManager RSS {point.jm_rss / 2**20:.1f} MiB, list "
                  f"{median(point.cli_list_ms):.0f} ms, one job {median(point.job_ms):.0f} ms",
                  file=sys.stderr)
            measured.append(point)
        kind = bench.cluster.broker_kind
    return measured, waves, kind, warm_up


# -- the report -------------------------------------------------------------------------------


def mib(value: float) -> str:
    return f"{value / 2**20:.1f}"


def report(points: list[Point], waves: list[Wave], kind: str, warm_up: float,
           plain: Plain | None, max_jobs: int) -> str:
    point_rows = [(
        f"{pt.soak_jobs:,}", f"{pt.stored:,}", mib(pt.jm_rss), pt.jm_threads, pt.jm_files,
        mib(pt.broker_rss),
        f"{median(pt.cli_list_ms):.0f} ({min(pt.cli_list_ms):.0f}-{max(pt.cli_list_ms):.0f})",
        f"{median(pt.all_jobs_ms):.1f} ({min(pt.all_jobs_ms):.1f}-{max(pt.all_jobs_ms):.1f})",
        f"{median(pt.job_ms):.0f} / {percentile(pt.job_ms, 0.95):.0f}", f"{pt.load:.1f}")
        for pt in points]
    wave_rows = []
    for wave in waves:
        wave_rows.append((
            f"{wave.start:,} → {wave.start + wave.jobs:,}", f"{wave.seconds:.0f}",
            f"**{wave.jobs / wave.seconds:.1f}**", f"{wave.slowest_stretch:.1f}",
            mib(wave.peak_rss), f"{wave.jm_cpu_ms_per_job:.1f}", wave.restarts, wave.load))
    lines = [
        f"Machine: {machine_summary()}.",
        f"Broker {kind}; 2 TaskManagers x 2 slots, spark.start eager, "
        f"jobstore.retention.max-jobs {max_jobs:,}; warm-up job {warm_up:.1f} s; the tiny "
        f"job `from_range(0, 3).collect()`, {IN_FLIGHT} in flight during a wave.",
        "",
        "At each point (no soak job in flight): the JobManager (RSS MiB, threads, open "
        f"files), the broker's RSS, `clusterdeck list --json` and `JobClient.all_jobs()` "
        f"(ms, median of {LIST_RUNS}, range), one tiny job alone (ms, p50 / p95 of "
        f"{LATENCY_JOBS}, submit to result):",
        "",
        markdown_table(["soak jobs", "jobs listed", "JM RSS", "JM threads", "JM files",
                        "broker RSS", "`list` CLI ms", "`all_jobs()` ms",
                        "one job ms p50 / p95", "load"], point_rows),
    ]
    if wave_rows:
        lines += ["", f"Waves: seconds, jobs/s sustained (first submission to last result), "
                  f"the slowest {STRETCH} consecutive jobs in it, the JobManager's peak RSS "
                  f"(MiB) and CPU per job (ms), attempts run again:", "",
                  markdown_table(["wave", "s", "jobs/s", f"slowest {STRETCH} jobs/s",
                                  "JM peak RSS", "JM CPU ms/job", "restarts",
                                  "CPU busy / load"], wave_rows)]
    if plain is not None:
        ours = [ms for pt in points for ms in pt.job_ms]
        lines += ["", markdown_table(["one tiny job", "p50 ms", "p95 ms", "min ms"], [
            ("clusterdeck, warm cluster (every point)", f"{median(ours):.0f}",
             f"{percentile(ours, 0.95):.0f}", f"{min(ours):.0f}"),
            (f"plain PySpark local[2], warm session ({len(plain.warm_ms)} runs)",
             f"{median(plain.warm_ms):.0f}", f"{percentile(plain.warm_ms, 0.95):.0f}",
             f"{min(plain.warm_ms):.0f}"),
            ("plain PySpark local[2], cold (process start to first result)",
             f"{1000 * plain.cold_s:.0f}", "", "")])]
    if len(points) > 1:
        first, last = points[0], points[-1]
        lines += ["", f"From {first.soak_jobs:,} to {last.soak_jobs:,} jobs: JobManager RSS "
                  f"{mib(first.jm_rss)} → {mib(last.jm_rss)} MiB, `list` "
                  f"{median(first.cli_list_ms):.0f} → {median(last.cli_list_ms):.0f} ms, "
                  f"one job {median(first.job_ms):.0f} → {median(last.job_ms):.0f} ms; "
                  f"jobs/s per wave {', '.join(f'{w.jobs / w.seconds:.1f}' for w in waves)} "
                  f"(mean {statistics.fmean(w.jobs / w.seconds for w in waves):.1f})."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--plain-child":
        plain_child(argv[1], int(argv[2]), float(argv[3]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="points 0, 100, 300")
    parser.add_argument("--points", type=int, nargs="+",
                        help="soak jobs run at each measuring point (default 0 1000 3000)")
    parser.add_argument("--max-jobs", type=int, default=1000,
                        help="jobstore.retention.max-jobs (default 1000, the default)")
    parser.add_argument("--skip-plain", action="store_true", help="no plain PySpark peer")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    points = sorted(set(args.points or ([0, 100, 300] if args.quick else [0, 1000, 3000])))
    plain = None
    if not args.skip_plain:  # first, alone: the cluster is not running yet
        plain = run_plain(PLAIN_RUNS + 1)
        print(f"  plain PySpark: cold {plain.cold_s:.1f} s, warm "
              f"{median(plain.warm_ms):.0f} ms", file=sys.stderr)
    measured, waves, kind, warm_up = measure(points, args.max_jobs)
    print(report(measured, waves, kind, warm_up, plain, args.max_jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
