"""examples/streaming_window.py with batch functions (docs/job-api.md, ``map_batches``):
each record's key computed over a whole micro-batch at once, vectorised on its Arrow
columns, and each fired window's line made per batch of windows. Its output is
streaming_window.py's, line for line.

    clusterdeck submit examples/streaming_batches.py -- OUT [COUNT] [RATE]

OUT: the output folder; COUNT records in all (default 2000; 0: for ever, until
cancelled); RATE records a second (default 500). Output: a line ``key-<k>,<t>,<t + 1>,10``
for each key and whole window of event time.
"""

import numpy as np
import pyarrow as pa

EVENTS_PER_SECOND = 100  # of event time: what one record's index is worth


def keyed(batch: pa.Table) -> pa.Table:
    """The batch's records ``(index, _)`` as ``(index, "key-<index mod 10>")``: one numpy
    expression over the index column, not a Python call per record. Before
    ``assign_timestamps``: a batch function's records all carry its batch's latest time."""
    index = batch["_1"].to_numpy()
    keys = np.char.add("key-", (index % 10).astype(str))
    return pa.table({"index": batch["_1"], "key": pa.array(keys.tolist())})


def lines(windows: list) -> list[str]:
    return [f"{key},{start:g},{end:g},{count}" for key, start, end, count in windows]


def build(env):
    out = env.args[0] if env.args else "streaming-batches-out"
    count = int(env.args[1]) if len(env.args) > 1 else 2000
    rate = float(env.args[2]) if len(env.args) > 2 else 500.0
    env.set_job_name("rate windows by batch functions").set_parallelism(2)
    env.enable_checkpointing(0.5)
    (env.rate_source(rate, count or None)
        .map_batches(keyed, format="arrow", name="key per batch")
        .assign_timestamps(lambda record: record[0] / EVENTS_PER_SECOND,
                           max_out_of_orderness=0.2)
        .key_by(1)
        .window(1.0).count(name="count per second")
        .map_batches(lines, name="lines per batch")
        .write_text(out))
