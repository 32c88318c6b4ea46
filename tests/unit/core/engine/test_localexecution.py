"""Local execution: which subtasks run without Spark, and that they run as a Spark
worker would run them (their own copies of the functions, counters per attempt)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pyspark.accumulators import INT_ACCUMULATOR_PARAM, Accumulator

from clusterdeck.core.engine.localexecution import (
    local_chain,
    run_locally,
    runs_locally,
    small_text,
    source_items,
)
from clusterdeck.core.engine.tally import LiveCounts
from clusterdeck.core.jobapi.counters import CounterScope
from clusterdeck.core.jobapi.errors import SubtaskCancelled
from clusterdeck.core.jobapi.inputsplits import plan_splits
from clusterdeck.core.jobapi.loader import LoadedJob, load_job
from clusterdeck.core.protocol.jobgraph import InputSplit


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
        items = source_items(job, vertex, plan_splits(vertex)[subtask:subtask + 1])
        rows = run_locally(job, vertex, items, None, counts, lambda: cancelled,
                           f"attempt-{subtask}")
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


def test_a_text_source_chains_locally_batch_by_batch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("x\n")
    job = loaded(tmp_path, "env.read_text('in.txt').flat_map(str.split).collect()")
    assert local_chain(job, job.graph.vertices[0])
    assert not runs_locally(job, job.graph.vertices[0], plan_splits(job.graph.vertices[0]),
                            1000)  # a text source is decided per batch (small_text)


def text_splits(tmp_path, *contents: bytes, name: str = "part{}.txt") -> list[InputSplit]:
    splits = []
    for index, content in enumerate(contents):
        path = tmp_path / name.format(index)
        path.write_bytes(content)
        splits.append(InputSplit(index, "vertex-1", path=str(path)))
    return splits


def test_small_text_cuts_lines_as_sparks_text_reader_does(tmp_path):
    splits = text_splits(tmp_path, b"a\r\nb\rc\n\nd", b"", b"e\n", "é\r".encode())
    assert small_text(splits, 1000) == ["a", "b", "c", "", "d", "e", "é"]


def test_a_byte_range_reads_the_lines_that_start_in_it(tmp_path):
    [whole] = text_splits(tmp_path, b"one\ntwo\nthree\n")
    second = InputSplit(0, "vertex-1", path=whole.path, start=2, length=7)
    assert small_text([second], 1000) == ["two", "three"]


@pytest.mark.parametrize("case", ["lines", "bytes", "compressed", "url"])
def test_text_that_is_not_small_or_not_plain_goes_to_spark(tmp_path, case):
    if case == "lines":
        splits = text_splits(tmp_path, b"x\n" * 11)
    elif case == "bytes":
        splits = text_splits(tmp_path, b"x" * (10 * 1024 + 1))
    elif case == "compressed":
        splits = text_splits(tmp_path, b"x\n", name="part{}.txt.gz")
    else:
        splits = [InputSplit(0, "vertex-1", path="s3a://bucket/part0.txt")]
    assert small_text(splits, 10) is None
