"""Declaring a streaming job: what makes a job streaming, and the clear errors for what a
streaming job cannot hold yet (docs/streaming.md)."""

from __future__ import annotations

import pytest

from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.errors import JobDefinitionError
from clusterdeck.core.protocol.checkpoints import CheckpointingMode, CheckpointOptions
from clusterdeck.core.protocol.jobgraph import JobKind


def streaming_env() -> ExecutionEnvironment:
    env = ExecutionEnvironment("s").set_parallelism(2)
    env.enable_checkpointing(0.5, "at-least-once", tolerable_failures=2)
    return env


def test_a_rate_source_makes_a_streaming_job_of_one_chain_with_its_checkpointing():
    env = streaming_env()
    env.rate_source(100, 1000).map(str).filter(bool).write_text("/tmp/out")
    graph, _ = build_graph(env)
    assert graph.kind is JobKind.STREAMING and len(graph.vertices) == 1 and not graph.edges
    assert [op.kind for op in graph.vertices[0].operators] == [
        "source.rate", "map", "filter", "sink.text"]
    assert graph.checkpointing == CheckpointOptions(0.5, CheckpointingMode.AT_LEAST_ONCE,
                                                    tolerable_failures=2)


def test_a_folder_source_into_a_print_sink_is_a_streaming_job(tmp_path):
    env = streaming_env()
    env.folder_source(tmp_path, "*.csv", monitor_interval=0.2, stop_when_idle=5).map(
        str.upper).print()
    graph, _ = build_graph(env)
    assert graph.kind is JobKind.STREAMING and len(graph.vertices) == 1
    source, _, sink = graph.vertices[0].operators
    assert (source.kind, sink.kind) == ("source.folder", "sink.print")
    assert source.params == {"path": str(tmp_path), "pattern": "*.csv",
                             "monitor_interval": 0.2, "stop_when_idle": 5.0}
    assert graph.vertices[0].parallelism == 2


def test_a_folder_sources_path_is_made_absolute_and_runs_for_ever_by_default(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = streaming_env()
    env.folder_source("in").write_text("out")
    source = build_graph(env)[0].vertices[0].operators[0]
    assert source.params == {"path": str(tmp_path / "in"), "pattern": "*",
                             "monitor_interval": 1.0, "stop_when_idle": None}


def test_a_job_may_not_write_into_the_folder_it_watches(tmp_path):
    env = streaming_env()
    env.folder_source(tmp_path).write_text(tmp_path)
    with pytest.raises(JobDefinitionError, match="writes into the folder its job watches"):
        build_graph(env)


def test_print_is_a_streaming_sink_only():
    env = ExecutionEnvironment("b")
    env.from_range(3).print()
    with pytest.raises(JobDefinitionError, match="print\\(\\) is a sink of streaming jobs"):
        build_graph(env)


def test_a_batch_job_stays_a_dataflow_job():
    env = ExecutionEnvironment("b")
    env.from_range(10).write_text("/tmp/out")
    graph, _ = build_graph(env)
    assert graph.kind is JobKind.DATAFLOW and graph.checkpointing is None


@pytest.mark.parametrize("declare, complaint", [
    (lambda env: env.rate_source(10).key_by(0).count().write_text("/tmp/o"),
     "cannot run in a streaming job yet"),
    (lambda env: env.rate_source(10).collect(), "cannot run in a streaming job yet"),
    (lambda env: env.rate_source(10).map(str, parallelism=1).write_text("/tmp/o"),
     "one chain of operators per subtask"),
])
def test_what_a_streaming_job_cannot_hold_yet_is_refused_saying_so(declare, complaint):
    env = streaming_env()
    declare(env)
    with pytest.raises(JobDefinitionError, match=complaint):
        build_graph(env)


def test_a_streaming_file_sink_needs_checkpoints():
    env = ExecutionEnvironment("s")
    env.rate_source(10).write_text("/tmp/o")
    with pytest.raises(JobDefinitionError, match="enable_checkpointing"):
        build_graph(env)


@pytest.mark.parametrize("call, complaint", [
    (lambda env: env.rate_source(0), "rate is records a second"),
    (lambda env: env.rate_source(10, count=-1), "count is a whole number"),
    (lambda env: env.enable_checkpointing(0), "interval must be positive"),
    (lambda env: env.enable_checkpointing(1, "twice"), "enable_checkpointing"),
    (lambda env: env.enable_checkpointing(1, retained=0), "retained"),
    (lambda env: env.folder_source("/tmp/in", "a/*"), "pattern is a glob of file names"),
    (lambda env: env.folder_source("/tmp/in", monitor_interval=0), "monitor_interval"),
    (lambda env: env.folder_source("/tmp/in", stop_when_idle=-1), "stop_when_idle"),
    (lambda env: env.folder_source("/tmp/in", stop_when_idle=True), "stop_when_idle"),
    (lambda env: env.folder_source("s3a://bucket/in"), "a shared mount is file:///"),
])
def test_nonsense_arguments_are_refused(call, complaint):
    with pytest.raises(ValueError, match=complaint):
        call(ExecutionEnvironment("s"))
