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
])
def test_nonsense_arguments_are_refused(call, complaint):
    with pytest.raises(ValueError, match=complaint):
        call(ExecutionEnvironment("s"))
