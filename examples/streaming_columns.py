"""examples/streaming_window.py written declaratively (docs/streaming.md, "Columnar
batches"): no Python call per record, so the rate source's records stay Arrow columns
from the source through the keyed exchange into the window's vectorised count. Its
output is streaming_window.py's, line for line.

    clusterdeck submit examples/streaming_columns.py -- OUT [COUNT] [RATE] [WINDOWS] \\
        [MODE] [INTERVAL]

The arguments are streaming_window.py's. Each batch's event times, ``index / 100``, are
one numpy expression over its index column (``map_batches(format="arrow")``), taken from
that column by ``assign_timestamps(field=2)``; the key is the record's field 1.
"""

import pyarrow as pa

EVENTS_PER_SECOND = 100  # of event time: what one record's index is worth


def with_times(batch: pa.Table) -> pa.Table:
    """``(index, key)`` records as ``(index, key, index / 100)``, for the whole batch."""
    index = batch["_1"].to_numpy()
    return pa.table({"index": batch["_1"], "key": batch["_2"],
                     "time": index / EVENTS_PER_SECOND})


def build(env):
    out = env.args[0] if env.args else "streaming-columns-out"
    count = int(env.args[1]) if len(env.args) > 1 else 2000
    rate = float(env.args[2]) if len(env.args) > 2 else 500.0
    windows = int(env.args[3]) if len(env.args) > 3 else 3
    mode = env.args[4] if len(env.args) > 4 else "exactly-once"
    interval = float(env.args[5]) if len(env.args) > 5 else 0.5
    env.set_job_name("rate windows over columns").set_parallelism(2)
    env.enable_checkpointing(interval, mode)
    (env.rate_source(rate, count or None)
        .map_batches(with_times, format="arrow", name="event times per batch")
        .assign_timestamps(field=2, max_out_of_orderness=0.2)
        .key_by(1)
        .window(1.0).count(parallelism=windows, name="count per second")
        .map(lambda window: f"{window[0]},{window[1]:g},{window[2]:g},{window[3]}")
        .write_text(out))
