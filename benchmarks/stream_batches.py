"""What one streaming batch costs in Spark: a Spark job per batch (``parallelize(batch, 1)``,
the partition function, ``collect``: how every streaming vertex ran each batch before
issue 35) against the attempt's long-lived Spark task (core/engine/continuous.py: one
Spark job for the attempt, each batch a round trip to its Python worker over a Unix
socket), at BATCH sizes of records.

The batch is the keyed window count of ``benchmarks/jobs/window_count.py``: records
``(i, "key-<i mod 10>")`` keyed, timestamped and pre-aggregated per key and 1 s window,
as the window vertex's chain runs it (``StreamChain``'s partition function). An in-process
SparkSession ``local[2]`` with Python workers over Unix domain sockets, as a
TaskManager's. Each size runs ROUNDS batches after WARM batches; the table has the
median and p90 milliseconds per batch and the records a second that makes.

    python -m benchmarks.stream_batches [--sizes 10 100 2000 20000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import machine_summary, markdown_table, median, percentile
from clusterdeck.core.engine.continuous import BatchRunner, ContinuousWorker, SparkJobs
from clusterdeck.core.engine.streamfunctions import (
    Chained,
    MapElement,
    PartitionFunction,
    Timestamped,
    WindowContributions,
    WindowPartials,
    one,
)
from clusterdeck.core.streaming.eventtime import TumblingWindows

WARM = 3
KEYS = 10
RATE = 2000.0  # records a second of event time: the batch spans its share of windows


def window_batch() -> PartitionFunction:
    """The window vertex's partition function for a keyed 1 s tumbling count."""
    contributions = WindowContributions(lambda record: record[1], TumblingWindows(1.0), one,
                                        float("-inf"))
    return Chained([MapElement(lambda record: (record[0], f"key-{record[0] % KEYS}")),
                    Timestamped(lambda record: record[0] / RATE)],
                   WindowPartials(contributions, lambda a, b: a + b))


def timed(runner: BatchRunner, function: PartitionFunction, size: int,
          rounds: int) -> list[float]:
    batch = [(None, (index, "")) for index in range(size)]
    for _ in range(WARM):
        runner.run(function, batch)
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        runner.run(function, batch)
        seconds.append(time.perf_counter() - started)
    return seconds


def measure(spark: Any, sizes: Sequence[int], rounds: int) -> list[list[Any]]:
    context = spark.sparkContext
    runners: list[tuple[str, Callable[[], BatchRunner]]] = [
        ("Spark job per batch", lambda: SparkJobs(context)),
        ("long-lived Spark task", lambda: ContinuousWorker(context))]
    rows = []
    for size in sizes:
        for name, make in runners:
            runner = make()
            try:
                seconds = timed(runner, window_batch(), size, rounds if size < 20_000
                                else max(5, rounds // 3))
            finally:
                runner.close()
            middle = median(seconds)
            rows.append([f"{size:,}", name, f"{middle * 1000:.2f}",
                         f"{percentile(seconds, 0.9) * 1000:.2f}",
                         f"{size / middle:,.0f}"])
            print(*rows[-1], sep="  ", flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10, 100, 2000, 20_000])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("stream-batches")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.python.unix.domain.socket.enabled", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    load = Path("/proc/loadavg").read_text(encoding="ascii").split()[:3]
    try:
        rows = measure(spark, args.sizes, args.rounds)
    finally:
        spark.stop()
    after = Path("/proc/loadavg").read_text(encoding="ascii").split()[:3]
    print()
    print(markdown_table(["records a batch", "Spark work", "ms a batch (median)",
                          "p90 ms", "records/s"], rows))
    print(f"\n{machine_summary()}; load average before {' '.join(load)}, "
          f"after {' '.join(after)}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
