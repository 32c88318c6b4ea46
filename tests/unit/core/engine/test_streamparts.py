"""A streaming task's source and sink as the task sees them: built from the operators the
job API declares, their state through JSON and back, whichever source or sink it is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterdeck.core.engine.streamparts import Printed, open_sink, open_source
from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.protocol.jobgraph import OperatorSpec


def operators(declare) -> tuple[OperatorSpec, ...]:
    env = ExecutionEnvironment("s")
    env.enable_checkpointing(1)
    declare(env)
    graph, _ = build_graph(env)
    return graph.vertices[0].operators


def through_json(state):
    return json.loads(json.dumps(state))


def test_a_folder_source_restored_from_its_snapshot_goes_on_after_it(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("1\n2\n3\n")
    source_op, _ = operators(
        lambda env: env.folder_source(folder, "*.txt", monitor_interval=0.5).print())
    source = open_source(source_op, 0, 1)
    source.restore(None)
    assert source.poll(0.0, 10) == [] and source.poll(0.5, 2) == ["1", "2"]
    restored = open_source(source_op, 0, 1)
    restored.restore(through_json(source.snapshot(1)))
    assert restored.poll(0.0, 10) == ["3"]
    assert not restored.exhausted and restored.seconds_to_next(0.1) == pytest.approx(0.4)


def test_a_rate_source_gives_records_and_keeps_its_next_index() -> None:
    source_op, _ = operators(lambda env: env.rate_source(1000, 10).write_text("/tmp/o"))
    source = open_source(source_op, 0, 1)
    source.restore(4)
    assert source.poll(0.0, 2) + source.poll(0.001, 2) == [(4, "key-4"), (5, "key-5")]
    assert through_json(source.snapshot(1)) == 6


def test_a_file_sink_commits_what_its_restored_state_holds(tmp_path: Path) -> None:
    _, sink_op = operators(lambda env: env.rate_source(10).write_text(tmp_path / "out"))
    sink = open_sink(sink_op, 0, 1, "a0", None)
    sink.restore(None)
    sink.write(["a", "b"])
    state = through_json(sink.snapshot(1))
    sink.close()
    again = open_sink(sink_op, 0, 1, "a1", None)
    again.restore(state)  # the notice of checkpoint 1 was lost with the first attempt
    assert [Path(f).read_text() for f in again.output().files] == ["a\nb\n"]
    assert again.output().stdout_file == ""


def test_a_print_sink_prints_into_the_attempts_output_file_and_feed(tmp_path: Path) -> None:
    _, sink_op = operators(lambda env: env.rate_source(10).print())
    fed: list[str] = []
    printed = tmp_path / "output" / "job_v_0_a0.stdout"
    sink = open_sink(sink_op, 0, 1, "a0", Printed(printed, fed.append))
    sink.restore(None)
    assert sink.output().stdout_file == ""  # nothing printed: no file named
    sink.write(["(1, 'key-1')"])
    assert sink.snapshot(3) is None
    sink.committed(3)
    sink.close()
    assert printed.read_text() == "(1, 'key-1')\n" and fed == ["(1, 'key-1')\n"]
    assert sink.output().stdout_file == str(printed) and sink.output().files == ()


def test_a_print_sink_needs_an_output_file() -> None:
    _, sink_op = operators(lambda env: env.rate_source(10).print())
    with pytest.raises(ValueError, match="output file"):
        open_sink(sink_op, 0, 1, "a0", None)


def test_operators_that_are_not_streaming_parts_are_refused() -> None:
    op = OperatorSpec("op-1", "source.text", "read_text", {"paths": [os.devnull]})
    with pytest.raises(ValueError, match="not a streaming source"):
        open_source(op, 0, 1)
    with pytest.raises(ValueError, match="not a streaming sink"):
        open_sink(OperatorSpec("op-2", "sink.collect", "collect", {}), 0, 1, "a0", None)
