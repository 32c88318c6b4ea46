"""The keyed tumbling-window count of ``benchmarks/streaming_windows.py``, clusterdeck's side
(its shape is ``examples/streaming_window.py``'s).

    clusterdeck submit benchmarks/jobs/window_count.py -- OUT COUNT RATE KEYS PARALLELISM \
        [WINDOW] [INTERVAL] [OUT_OF_ORDERNESS]

Record ``i`` of the rate source becomes ``(i, "key-<i mod KEYS>")`` and happens at ``i /
RATE`` seconds of event time: the time the source is due to emit it, counted from the
source's start, so event time runs with the wall clock while the job keeps up. Counted
per key in tumbling WINDOW-second windows (default 1), a line ``key,start,end,count`` per
key and window, committed with each checkpoint (every INTERVAL seconds, default 0.5).
COUNT 0 runs until cancelled. Sources and windows both have PARALLELISM subtasks.
"""


def build(env):
    out, count, rate, keys, parallelism = env.args[:5]
    count, rate, keys, parallelism = int(count), float(rate), int(keys), int(parallelism)
    window = float(env.args[5]) if len(env.args) > 5 else 1.0
    interval = float(env.args[6]) if len(env.args) > 6 else 0.5
    out_of_orderness = float(env.args[7]) if len(env.args) > 7 else 0.2
    env.set_job_name("window count bench").set_parallelism(parallelism)
    env.enable_checkpointing(interval)
    (env.rate_source(rate, count or None)
        .map(lambda record: (record[0], f"key-{record[0] % keys}"), name="key")
        .assign_timestamps(lambda record: record[0] / rate,
                           max_out_of_orderness=out_of_orderness)
        .key_by(1)
        .window(window).count(name="count per window")
        .map(lambda w: f"{w[0]},{w[1]:.3f},{w[2]:.3f},{w[3]}", name="format")
        .write_text(out))
