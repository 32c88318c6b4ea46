"""A job that fails in one subtask: record 777 raises, the other subtasks are fine.

    clusterdeck submit examples/failing_job.py

Shows what a failure looks like: the failing subtask, the user's traceback, the root
cause of the job.
"""


def check(number):
    if number == 777:
        raise ValueError(f"record {number} is bad")
    return number * 2


def build(env):
    env.set_job_name("failing_job")
    env.set_parallelism(4)
    env.from_range(0, 1000, name="numbers").map(check, name="check").collect(name="doubled")
