"""A streaming job with per-key value state (docs/streaming.md, "Keyed streams and
windows"): the rate generator's records keyed by user, and a process function that keeps
each user's round, count and total in its value state and emits a line every tenth
record of a user, then starts the user's next round.

    clusterdeck submit examples/streaming_state.py -- OUT [COUNT] [RATE] [USERS]

OUT: the output folder; COUNT records in all (default 2000; 0: for ever, until
cancelled); RATE records a second (default 500); USERS distinct users (default 10).
Record ``(index, "user-<index mod USERS>")`` adds ``index`` to its user's total: the
output is a line ``user-<u>,<round>,<total>`` for each user and each run of ten of its
records, exactly once across failures, since the state is checkpointed with the source's
position and the files commit with each checkpoint. The source's subtask *s* of 2 emits
the indices *s*, *s + 2*, ...: with USERS even, each user's records come from one
subtask, in order, so the output is the same on every run.
"""

RUN = 10  # records of a user that make one line


def every_tenth(record, state):
    """Count and sum a user's records; at the tenth, emit and start over."""
    index, user = record
    rounds, seen, total = state.value() or (0, 0, 0)
    seen, total = seen + 1, total + index
    if seen < RUN:
        state.update((rounds, seen, total))
        return None
    state.update((rounds + 1, 0, 0))
    return [f"{user},{rounds},{total}"]


def build(env):
    out = env.args[0] if env.args else "streaming-state-out"
    count = int(env.args[1]) if len(env.args) > 1 else 2000
    rate = float(env.args[2]) if len(env.args) > 2 else 500.0
    users = int(env.args[3]) if len(env.args) > 3 else 10
    env.set_job_name("running totals per user").set_parallelism(2)
    env.enable_checkpointing(0.5)
    (env.rate_source(rate, count or None)
        .map(lambda record: (record[0], f"user-{record[0] % users}"))
        .key_by(1)
        .process(every_tenth, name="every tenth per user")
        .write_text(out))
