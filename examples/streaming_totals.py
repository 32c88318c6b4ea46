"""A streaming job of three vertices, two keyed exchanges one after the other
(docs/streaming.md, "Keyed streams and windows"): the rate generator's records stamped
with an event time from their index, counted per key in tumbling one-second windows,
then those counts keyed by their window's start and summed in a second one-second window:
each second's total over all keys, a line of text committed with each checkpoint.

    clusterdeck submit examples/streaming_totals.py -- OUT [COUNT] [RATE]

OUT: the output folder; COUNT records in all (default 2000; 0: for ever, until
cancelled); RATE records a second (default 500). Record ``(index, "key-<index mod 10>")``
happens at ``index / 100`` seconds of event time, so every second holds 100 records: the
output is a line ``<t>,<t + 1>,100`` for each whole second (COUNT 2000: 20 lines). The
vertices: the source (1 subtask), the counts per key (2), the totals (1): four slots.
"""

EVENTS_PER_SECOND = 100  # of event time: what one record's index is worth


def build(env):
    out = env.args[0] if env.args else "streaming-totals-out"
    count = int(env.args[1]) if len(env.args) > 1 else 2000
    rate = float(env.args[2]) if len(env.args) > 2 else 500.0
    env.set_job_name("totals per second").set_parallelism(1)
    env.enable_checkpointing(0.5)
    (env.rate_source(rate, count or None)
        .assign_timestamps(lambda record: record[0] / EVENTS_PER_SECOND,
                           max_out_of_orderness=0.2)
        .key_by(1)
        .window(1.0).count(parallelism=2, name="count per key")
        .key_by(lambda window: window[1])           # the window's start
        .window(1.0).sum(3, name="total per second")
        .map(lambda total: f"{total[1]:g},{total[2]:g},{total[3]}")
        .write_text(out))
