"""Spark Structured Streaming's side of ``streaming_windows``: the same keyed tumbling-window
count as ``benchmarks/jobs/window_count.py``, run in a child process of its own (so that
the benchmark can kill its driver and start another on the same checkpoint).

    python -m benchmarks._structured_streaming SPEC.json

SPEC holds a list of ``queries``, run one after the other on one ``local[P]`` session;
each: ``out``, ``checkpoint``, ``rate``, ``keys``, ``window``, ``interval`` (the trigger),
``out_of_orderness``, ``duration`` (seconds; 0: until killed) and ``progress`` (a file
that gets one JSON line per micro-batch, ``query.recentProgress`` as it comes, and
``started``/``stopped`` lines with wall times).

The query: ``rate`` source (``rowsPerSecond``, ``numPartitions`` P) -> ``key-<value mod
KEYS>`` (a SQL expression; with ``key: "udf"`` the same by a Python UDF, _window_forms.py)
-> ``withWatermark(timestamp, out_of_orderness)`` -> ``groupBy(window(timestamp,
WINDOW), key).count()`` -> a text line ``key,start,end,count`` per key and window (times
in epoch seconds) -> file sink, append mode, ``trigger(processingTime=INTERVAL)``.

The rate source releases its rows one whole second at a time, counted from its creation
time, which it keeps in ``<checkpoint>/sources/0/0``. That file is written here before
the first start with a creation time on a whole second of the wall clock, so a second
of rows is released exactly at the end of a window (windows are aligned to the epoch);
otherwise every window would also wait for the source's random offset within a second.
A query restarted on its checkpoint keeps the time it was created with.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any


def _prepare_source_start(checkpoint: Path) -> None:
    """The rate source's creation time, a whole second soon after now (first start only)."""
    log = checkpoint / "sources" / "0" / "0"
    if log.exists():
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    start_ms = (math.floor(time.time()) + 2) * 1000
    log.write_text(f"v1\n{start_ms}", encoding="utf-8")


def _record(progress: Path, entry: dict[str, Any]) -> None:
    with open(progress, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry, default=str) + "\n")


def run_query(spark: Any, spec: dict[str, Any]) -> None:
    from pyspark.sql import functions as F
    checkpoint, progress = Path(spec["checkpoint"]), Path(spec["progress"])
    _prepare_source_start(checkpoint)
    keys = int(spec["keys"])
    rows = (spark.readStream.format("rate").option("rowsPerSecond", int(spec["rate"]))
            .option("numPartitions", int(spec["parallelism"])).load())
    if spec.get("key", "sql") == "udf":  # the clusterdeck lambda job's key, in Python
        from benchmarks._window_forms import python_key
        key = F.udf(python_key(keys), "string")(F.col("value"))
    else:
        key = F.concat(F.lit("key-"), (F.col("value") % keys).cast("string"))
    keyed = rows.select("timestamp", key.alias("key"))
    window = f"{int(spec['window'] * 1000)} milliseconds"
    counts = (keyed.withWatermark("timestamp", f"{int(spec['out_of_orderness'] * 1000)} "
                                               "milliseconds")
              .groupBy(F.window("timestamp", window), "key").count())
    lines = counts.select(F.format_string(
        "%s,%.3f,%.3f,%d", "key", F.unix_millis(F.col("window.start")) / 1000.0,
        F.unix_millis(F.col("window.end")) / 1000.0, "count").alias("value"))
    query = (lines.writeStream.format("text").outputMode("append")
             .option("path", spec["out"]).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime=f"{int(spec['interval'] * 1000)} milliseconds")
             .start())
    _record(progress, {"started": time.time()})
    seen = -1
    began = time.monotonic()
    duration = float(spec["duration"])
    while query.isActive and (duration <= 0 or time.monotonic() - began < duration):
        time.sleep(0.2)
        for entry in query.recentProgress:
            if entry["batchId"] > seen:
                seen = entry["batchId"]
                _record(progress, {"progress": entry, "at": time.time()})
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")
    query.stop()
    _record(progress, {"stopped": time.time()})


def main(spec_path: str) -> int:
    begun = time.time()
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    parallelism = int(spec["parallelism"])
    spark = (SparkSession.builder.master(f"local[{parallelism}]")
             .appName("window-count-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(parallelism))
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    ready = time.time()
    for query in spec["queries"]:
        _record(Path(query["progress"]), {"process_started": begun, "session_ready": ready})
        run_query(spark, {**query, "parallelism": parallelism})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
