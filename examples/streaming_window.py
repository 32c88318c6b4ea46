"""A keyed streaming job with event-time windows (docs/streaming.md, "Keyed streams and
windows"): the rate generator's records stamped with an event time from their index,
keyed by their key, counted per key in tumbling one-second windows, each window a line
of text in files that become visible with each completed checkpoint.

    clusterdeck submit examples/streaming_window.py -- OUT [COUNT] [RATE] [WINDOWS] \\
        [MODE] [INTERVAL]

OUT: the output folder; COUNT records in all (default 2000; 0: for ever, until
cancelled); RATE records a second (default 500). Record ``(index, "key-<index mod 10>")``
happens at ``index / 100`` seconds of event time, so every window ``[t, t + 1)`` holds
100 records, 10 of each key: the output is a line ``key-<k>,<t>,<t + 1>,10`` for each key
and whole window (COUNT 2000: 200 lines). Two vertices: the source and its timestamps (2
subtasks), then, after a HASH exchange by key, the window and the sink (WINDOWS
subtasks, default 3). MODE: the checkpointing mode, ``exactly-once`` (default) or
``at-least-once``. INTERVAL: seconds between checkpoints (default 0.5).
"""

EVENTS_PER_SECOND = 100  # of event time: what one record's index is worth


def build(env):
    out = env.args[0] if env.args else "streaming-window-out"
    count = int(env.args[1]) if len(env.args) > 1 else 2000
    rate = float(env.args[2]) if len(env.args) > 2 else 500.0
    windows = int(env.args[3]) if len(env.args) > 3 else 3
    mode = env.args[4] if len(env.args) > 4 else "exactly-once"
    interval = float(env.args[5]) if len(env.args) > 5 else 0.5
    env.set_job_name("rate windows to files").set_parallelism(2)
    env.enable_checkpointing(interval, mode)
    (env.rate_source(rate, count or None)
        .assign_timestamps(lambda record: record[0] / EVENTS_PER_SECOND,
                           max_out_of_orderness=0.2)
        .key_by(1)
        .window(1.0).count(parallelism=windows, name="count per second")
        .map(lambda window: f"{window[0]},{window[1]:g},{window[2]:g},{window[3]}")
        .write_text(out))
