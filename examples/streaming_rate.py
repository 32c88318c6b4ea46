"""A streaming job (docs/streaming.md): records from a replayable rate generator, filtered
and formatted, into text files that become visible with each completed checkpoint.

    clusterdeck submit examples/streaming_rate.py -- OUT [COUNT] [RATE]

OUT: the output folder; COUNT records in all (default 2000; 0: for ever, until
cancelled); RATE records a second (default 500). Each record is ``(index, key)``; the
job writes ``index,key`` for every index but those with ``index % 7 == 3``.
"""


def build(env):
    out = env.args[0] if env.args else "streaming-out"
    count = int(env.args[1]) if len(env.args) > 1 else 2000
    rate = float(env.args[2]) if len(env.args) > 2 else 500.0
    env.set_job_name("rate to files").set_parallelism(2)
    env.enable_checkpointing(0.5)
    (env.rate_source(rate, count or None)
        .filter(lambda record: record[0] % 7 != 3)
        .map(lambda record: f"{record[0]},{record[1]}")
        .write_text(out))
