"""What following a PySpark script's Spark work costs (issue 37).

(a) Run time with and without following: the same scripts on a cluster of one
    TaskManager of one slot (``local[1]``) with ``taskmanager.spark-work.follow`` true
    and on one with it false: a word count over generated text (``--size-mb``, 1 GB by
    default, 0 for none; ``textFile -> flatMap -> map -> reduceByKey -> count``) and
    20,000 tiny tasks (``spark.range(0, 20000, 1, 20000).count()``: a JVM stage, Spark's
    cheapest task). Each script times its own Spark work (from its first action to its
    last), so the session's start and the submission do not count. Two clusters are up
    side by side, one followed and one not, each warmed up by a script of 2,000 tiny
    tasks; ``--runs`` pairs of runs, the two sides in turn (which goes first alternates).
    One SparkContext's run times grow with the tasks its status store keeps and fall as
    its JIT warms up, and this machine's speed drifts by tens of per cent over minutes, so
    all of one side first measures the order: a pair's runs meet stores of the same size,
    a minute apart at most. The medians and the median of the pairs' ratios are compared.
    Target: < 5 % slower when followed.
(b) Delay from a Spark task ending to the job's snapshot showing it: a script runs
    ``--delay-jobs`` Spark jobs of one task each, one a second; each task returns the
    time it ended (``time.time()``, same machine), and the client notes when a snapshot
    first shows that job's stage done. Target: p95 < 1 s.

    python -m benchmarks.spark_work [--size-mb N] [--runs N] [--delay-jobs N]

The input is generated (seeded: a 10,000-word vocabulary, Zipf weights) into a temporary
work folder and deleted at the end. Results go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import LoadMeter, machine_summary, median, percentile

WORDCOUNT = """
import sys
import time
from operator import add
from pyspark.sql import SparkSession

sc = SparkSession.builder.getOrCreate().sparkContext
started = time.monotonic()
words = sc.textFile(sys.argv[1]).flatMap(str.split).map(lambda w: (w, 1)).reduceByKey(add)
print("words", words.count())
print("took", time.monotonic() - started)
"""

TINY_TASKS = """
import sys
import time
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
started = time.monotonic()
tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
print("rows", spark.range(0, tasks, 1, tasks).count())
print("took", time.monotonic() - started)
"""

DELAY = """
import sys
import time
from pyspark import SparkContext

sc = SparkContext.getOrCreate()


def ended(_):
    time.sleep(0.2)
    return time.time()


for _ in range(int(sys.argv[1])):
    end = sc.parallelize([0], 1).map(ended).collect()[0]
    print("ended", max(sc.statusTracker().getJobIdsForGroup()), end, flush=True)
    time.sleep(1.0)
"""


@dataclass
class Timings:
    follow: bool
    wordcount_s: list[float] = field(default_factory=list)
    tiny_s: list[float] = field(default_factory=list)
    load: str = ""


def generate(path: Path, size_mb: int) -> None:
    """Seeded text of about ``size_mb`` MB: 8-12 words a line from a Zipf-weighted
    vocabulary of 10,000 words."""
    rng = random.Random(37)
    vocabulary = [f"w{n}" for n in range(10_000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    lines = [" ".join(rng.choices(vocabulary, weights, k=rng.randint(8, 12)))
             for _ in range(20_000)]
    block = "\n".join(lines) + "\n"
    with path.open("w", encoding="ascii") as out:
        for _ in range(max(1, size_mb * 1024 * 1024 // len(block))):
            out.write(block)


def submit(bench: Any, folder: Path, name: str, text: str, args: tuple[str, ...] = (),
           on_snapshot: Any = None) -> Any:
    from clusterdeck.core.protocol.states import JobStatus
    script = folder / name
    script.write_text(text, encoding="utf-8")
    job_id = bench.client.submit(script, args, cwd=str(folder))
    result = bench.client.wait(job_id, on_snapshot)
    if result.status is not JobStatus.FINISHED:
        raise RuntimeError(f"{name} ended {result.status}: {result.root_cause}")
    return result


def took(result: Any) -> float:
    return float(result.stdout.split("took ")[1].split()[0])


def run_pairs(folder: Path, data: Path | None, pairs: int) -> tuple[Timings, Timings]:
    """``pairs`` runs on each of two clusters up side by side, one followed, one not, in
    turn (which goes first alternates): each pair's two runs are minutes apart at most and
    meet status stores of the same size."""
    from benchmarks.submit_latency import bench_cluster
    on, off = Timings(True), Timings(False)
    with contextlib.ExitStack() as clusters:
        benches = {timings.follow: clusters.enter_context(bench_cluster(
            "spark-work", **{"taskmanager.count": 1, "taskmanager.slots": 1,
                             "taskmanager.spark-work.follow": timings.follow}))
            for timings in (on, off)}
        for bench in benches.values():  # warm-up: Spark's JIT and first jobs
            submit(bench, folder, "tiny.py", TINY_TASKS, ("2000",))
        meter = LoadMeter()
        for pair in range(pairs):
            for timings in (on, off) if pair % 2 == 0 else (off, on):
                run_once(benches[timings.follow], timings, folder, data)
        on.load = off.load = meter.stop().describe()
    return on, off


def run_once(bench: Any, timings: Timings, folder: Path, data: Path | None) -> None:
    if data is not None:
        timings.wordcount_s.append(took(submit(bench, folder, "wordcount.py", WORDCOUNT,
                                               (str(data),))))
    timings.tiny_s.append(took(submit(bench, folder, "tiny.py", TINY_TASKS)))
    counted = f"word count {timings.wordcount_s[-1]:.1f} s, " if data is not None else ""
    print(f"  follow={timings.follow} run {len(timings.tiny_s)}: {counted}20,000 tasks "
          f"{timings.tiny_s[-1]:.1f} s (load {os.getloadavg()[0]:.1f})", file=sys.stderr)


def delays(folder: Path, jobs: int) -> list[float]:
    """Seconds from each one-task Spark job's task ending to the first snapshot that shows
    its stage done."""
    from benchmarks.submit_latency import bench_cluster
    shown: dict[int, float] = {}
    lock = threading.Lock()

    def on_snapshot(snapshot: Any) -> None:
        now = time.time()
        for work in snapshot.graph.spark:
            for stage in work.stages:
                if stage.tasks and stage.done == stage.tasks:
                    with lock:
                        shown.setdefault(stage.job_id, now)
    with bench_cluster("spark-delay", **{"taskmanager.count": 1,
                                         "taskmanager.slots": 1}) as bench:
        result = submit(bench, folder, "delay.py", DELAY, (str(jobs),), on_snapshot)
    ended = {int(job): float(at) for _, job, at in
             (line.split() for line in result.stdout.splitlines()
              if line.startswith("ended "))}
    missing = set(ended) - set(shown)
    if missing:
        raise RuntimeError(f"no snapshot showed Spark jobs {sorted(missing)} done")
    return [shown[job] - at for job, at in sorted(ended.items())]


def slower(followed: list[float], not_followed: list[float]) -> str:
    ratios = [a / b for a, b in zip(followed, not_followed, strict=True)]
    return (f"medians {100 * (median(followed) / median(not_followed) - 1):+.1f} %, "
            f"median of the pairs {100 * (median(ratios) - 1):+.1f} %")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=6, help="pairs of runs")
    parser.add_argument("--delay-jobs", type=int, default=40)
    options = parser.parse_args(argv)
    print(f"Machine: {machine_summary()}; load average {os.getloadavg()}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="spark-work-bench-") as work:
        folder = Path(work)
        data = folder / "words.txt" if options.size_mb > 0 else None
        if data is not None:
            generate(data, options.size_mb)
        waits = delays(folder, options.delay_jobs)
        on, off = run_pairs(folder, data, options.runs)
    if data is not None:
        print(f"word count over {options.size_mb} MB: followed "
              f"{median(on.wordcount_s):.1f} s, not followed {median(off.wordcount_s):.1f} s"
              f" ({slower(on.wordcount_s, off.wordcount_s)})")
    print(f"20,000 tiny tasks: followed {median(on.tiny_s):.1f} s, not followed "
          f"{median(off.tiny_s):.1f} s ({slower(on.tiny_s, off.tiny_s)})")
    print(f"runs: followed {on.wordcount_s} / {on.tiny_s}, not followed "
          f"{off.wordcount_s} / {off.tiny_s}; CPU busy / load over both: {on.load}")
    print(f"delay task end -> snapshot over {len(waits)} Spark jobs: median "
          f"{median(waits):.2f} s, p95 {percentile(waits, 0.95):.2f} s, max {max(waits):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
