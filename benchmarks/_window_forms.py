"""The forms of ``streaming_windows``'s query each system can run, so that a comparison
says which: clusterdeck's job with per-record Python lambdas or its declarative, columnar
twin (``--job``), and Spark's key as a SQL expression or as a Python UDF (``--spark-key``).

- clusterdeck ``lambda``: ``benchmarks/jobs/window_count.py``: key and time by Python
  functions of each record (``map``, ``assign_timestamps(fn)``), called row by row over
  the rate source's column batches (core/engine/columnrows.py);
- clusterdeck ``columnar``: ``benchmarks/jobs/window_count_columnar.py``: the same key
  and time computed for a whole batch with numpy/pyarrow (``map_batches(format="arrow")``,
  ``assign_timestamps(field=...)``), records as Arrow columns end to end;
- Spark ``sql``: ``concat('key-', value % KEYS)``, evaluated in the JVM;
- Spark ``udf``: ``python_key``, the same function as the ``lambda`` job's key, as a
  ``pyspark.sql.functions.udf`` (a Python worker evaluates it, rows shipped to it in
  batches): the issue's "key computed by a Python function" on both sides.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

JOBS = {
    "lambda": Path(__file__).resolve().parent / "jobs" / "window_count.py",
    "columnar": Path(__file__).resolve().parent / "jobs" / "window_count_columnar.py",
}
SPARK_KEYS = ("sql", "udf")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--job", choices=sorted(JOBS), default="lambda",
                        help="clusterdeck's form of the query (lambda: per-record Python "
                             "functions; columnar: declarative, Arrow columns)")
    parser.add_argument("--spark-key", choices=SPARK_KEYS, default="sql",
                        help="Spark's key: a SQL expression, or the same Python function "
                             "as a Python UDF")


def python_key(keys: int) -> Callable[[int], str]:
    """The key of rate record ``value``, as ``window_count.py``'s lambda computes it."""

    def key(value: int) -> str:
        return f"key-{value % keys}"

    return key
