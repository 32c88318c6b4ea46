"""``benchmarks/jobs/window_count.py``'s query written declaratively: no Python call per
record anywhere, so the rate source makes its records as Arrow columns and they stay
columns through the exchange into the window's vectorised count (docs/streaming.md,
"Columnar batches").

    clusterdeck submit benchmarks/jobs/window_count_columnar.py -- OUT COUNT RATE KEYS \
        PARALLELISM [WINDOW] [INTERVAL] [OUT_OF_ORDERNESS]

The same arguments and the same output as window_count.py: record ``i`` keyed
``"key-<i mod KEYS>"`` and timed ``i / RATE`` seconds, here computed for a whole batch at
once by ``map_batches(format="arrow")`` (numpy and pyarrow), the time taken from a field
(``assign_timestamps(field=...)``) and the key from a field (``key_by``), both columns.
"""

import pyarrow as pa


class KeysAndTimes:
    """A batch of rate records ``(i, ...)`` to ``(i, "key-<i mod keys>", i / rate)``."""

    def __init__(self, keys: int, rate: float) -> None:
        self.names = pa.array([f"key-{k}" for k in range(keys)], pa.string())
        self.rate = rate

    def __call__(self, table: pa.Table) -> pa.Table:
        index = table.column("_1").to_numpy()
        key = pa.DictionaryArray.from_arrays(pa.array(index % len(self.names)), self.names)
        return pa.table({"index": index, "key": key.dictionary_decode(),
                         "time": index / self.rate})


def build(env):
    out, count, rate, keys, parallelism = env.args[:5]
    count, rate, keys, parallelism = int(count), float(rate), int(keys), int(parallelism)
    window = float(env.args[5]) if len(env.args) > 5 else 1.0
    interval = float(env.args[6]) if len(env.args) > 6 else 0.5
    out_of_orderness = float(env.args[7]) if len(env.args) > 7 else 0.2
    env.set_job_name("window count bench").set_parallelism(parallelism)
    env.enable_checkpointing(interval)
    (env.rate_source(rate, count or None)
        .map_batches(KeysAndTimes(keys, rate), format="arrow", name="key")
        .assign_timestamps(field=2, max_out_of_orderness=out_of_orderness)
        .key_by(1)
        .window(window).count(name="count per window")
        .map(lambda w: f"{w[0]},{w[1]:.3f},{w[2]:.3f},{w[3]}", name="format")
        .write_text(out))
