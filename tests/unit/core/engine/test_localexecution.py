"""Local execution: which subtasks run without Spark, and that they run as a Spark
worker would run them (their own copies of the functions, counters per attempt)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pyspark.accumulators import INT_ACCUMULATOR_PARAM, Accumulator

from clusterdeck.core.engine.localexecution import run_locally, runs_locally
from clusterdeck.core.engine.tally import LiveCounts
from clusterdeck.core.jobapi.counters import CounterScope
from clusterdeck.core.jobapi.errors import SubtaskCancelled
from clusterdeck.core.jobapi.inputsplits import plan_splits
from clusterdeck.core.jobapi.loader import LoadedJob, load_job


def loaded(tmp_path: Path, body: str, args: tuple[str, ...] = ()) -> LoadedJob:
    path = tmp_path / "job.py"
    path.write_text("def build(env):\n" + textwrap.indent(textwrap.dedent(body), "    "))
    return load_job(path, args)


def qualifies(job: LoadedJob, subtask: int = 0, max_records: int = 1000) -> bool:
    vertex = job.graph.vertices[0]
    return runs_locally(job, vertex, plan_splits(vertex)[subtask:subtask + 1], max_records)


@pytest.mark.parametrize("body, expected", [
    ("env.from_range(0, 10).map(str).write_text('out')", True),
    ("env.from_collection([1, 2]).filter(bool).flat_map(range).collect()", True),
    ("env.from_range(0, 10).collect()", True),
    ("env.from_range(0, 10).map(str).write_csv('out')", False),  # a table sink
    ("env.from_range(0, 10).map(str).write_parquet('out')", False),
    ("env.from_range(0, 10).key_by(0).count().collect()", False),  # keyed: not chained
    ("env.from_range(0, 10).sql('select * from input').collect()", False),
    ("env.from_range(0, 10, parallelism=2).map(str).collect()", False),  # two vertices
    ("env.read_text('in.txt').collect()", False),  # its size is not known up front
    ("env.from_range(0, 0).map(str).collect()", False),  # nothing to run: no Spark job anyway
])
def test_a_generated_source_chained_into_a_simple_sink_runs_locally(tmp_path, monkeypatch,
                                                                    body, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("a few\nlines\n")
    assert qualifies(loaded(tmp_path, body)) is expected


def test_the_limit_counts_the_records_of_the_subtasks_own_parts(tmp_path):
    job = loaded(tmp_path, """
        env.set_parallelism(4)
        env.from_range(0, 4001).map(str).collect()
    """)
    assert [qualifies(job, subtask) for subtask in range(4)] == [True, True, True, False]
    assert not qualifies(job, 0, max_records=0)


class _Context:
    """The one thing CounterScope asks of a SparkContext: a driver-side accumulator."""

    def __init__(self) -> None:
        self.made = 0

    def accumulator(self, value: int) -> Accumulator:
        self.made += 1
        return Accumulator(self.made, value, INT_ACCUMULATOR_PARAM)


def run(job: LoadedJob, subtask: int, cancelled: bool = False) -> tuple[list, dict, LiveCounts]:
    vertex = job.graph.vertices[0]
    counts = LiveCounts()
    with CounterScope(_Context(), job.counter_names) as counters:
        rows = run_locally(job, vertex, plan_splits(vertex)[subtask:subtask + 1], None,
                           counts, lambda: cancelled, f"attempt-{subtask}")
    return rows, counters.values(), counts


def test_each_attempt_counts_into_its_own_counters_and_copies(tmp_path):
    job = loaded(tmp_path, """
        seen = env.counter("seen")
        state = []
        def note(x):
            seen.add(1)
            state.append(x)  # a copy's list: never the job's
            return (x, len(state))
        env.set_parallelism(2)
        env.from_range(0, 6).map(note).flat_map(lambda p: [p, p]).filter(lambda p: p[0] != 4) \\
            .collect()
    """)
    first, second = run(job, 0), run(job, 1)
    assert first[0] == [[0, 1], [0, 1], [1, 2], [1, 2], [2, 3], [2, 3]]
    assert second[0] == [[3, 1], [3, 1], [5, 3], [5, 3]]
    assert (first[1], second[1]) == ({"seen": 3}, {"seen": 3})
    assert (second[2].records_in, second[2].records_out) == (3, 4)


def test_a_cancelled_attempt_stops_before_its_records(tmp_path):
    job = loaded(tmp_path, "env.from_range(0, 5).map(str).collect()")
    with pytest.raises(SubtaskCancelled):
        run(job, 0, cancelled=True)
