"""Declaring a streaming job: what makes a job streaming, and the clear errors for what a
streaming job cannot hold yet (docs/streaming.md)."""

from __future__ import annotations

import pytest

from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.errors import JobDefinitionError
from clusterdeck.core.protocol.checkpoints import CheckpointingMode, CheckpointOptions
from clusterdeck.core.protocol.jobgraph import JobKind, ShipStrategy


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
    (lambda env: env.rate_source(10).key_by(0).aggregate({"n": ("*", "count")}).print(),
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
    (lambda env: env.rate_source(1).key_by(0).process("f"), "expected a function"),
])
def test_nonsense_arguments_are_refused(call, complaint):
    with pytest.raises((ValueError, TypeError), match=complaint):
        call(ExecutionEnvironment("s"))


def stamped(env: ExecutionEnvironment, delay: float = 0.0):
    return env.rate_source(100).assign_timestamps(lambda record: record[0] / 100, delay)


def test_a_keyed_window_makes_a_source_vertex_and_a_keyed_vertex_joined_by_a_hash_edge():
    env = streaming_env()
    (stamped(env, 0.5).filter(bool).key_by(1).window(10, 5, offset=1).count(parallelism=3)
        .map(str).write_text("/tmp/out"))   # map and sink take their input's parallelism
    graph, code = build_graph(env)
    source, keyed = graph.vertices
    assert [op.kind for op in source.operators] == ["source.rate", "assign_timestamps",
                                                    "filter"]
    assert [op.kind for op in keyed.operators] == ["window", "map", "sink.text"]
    assert (source.parallelism, keyed.parallelism) == (2, 3)
    assert [(e.source, e.target, e.ship_strategy) for e in graph.edges] == [
        (source.id, keyed.id, ShipStrategy.HASH)]
    assert source.operators[1].params == {"max_out_of_orderness": 0.5}
    assert keyed.operators[0].params == {"key": {"fields": [1]}, "size": 10.0, "slide": 5.0,
                                         "offset": 1.0, "function": "count", "field": None}
    assert callable(code[source.operators[1].id].fn)


@pytest.mark.parametrize("aggregate, function", [
    (lambda w: w.count(), "count"), (lambda w: w.sum(0), "sum"),
    (lambda w: w.min(0), "min"), (lambda w: w.max("_1"), "max"), (lambda w: w.mean(), "mean"),
    (lambda w: w.reduce(max), "reduce"),
    (lambda w: w.aggregate(list, lambda a, r: [*a, r], lambda a, b: a + b, len), "aggregate"),
])
def test_every_window_aggregate_declares_its_function(aggregate, function):
    env = streaming_env()
    aggregate(stamped(env).key_by(lambda record: record[1]).window(2.5)).print()
    graph, code = build_graph(env)
    window = graph.vertices[1].operators[0]
    assert (window.params["function"], window.params["slide"]) == (function, 2.5)
    functions = code[window.id].aggregate
    assert (functions is not None) == (function == "aggregate")
    assert code[window.id].keys[0] is not None   # the key function travels as code


@pytest.mark.parametrize("running", ["count", "sum", "reduce", "process"])
def test_a_running_aggregate_needs_no_event_time(running):
    env = streaming_env()
    keyed = env.folder_source("/tmp/in").map(lambda line: (line, 1)).key_by(0)
    if running in ("reduce", "process"):
        getattr(keyed, running)(lambda a, b: a).print()
    else:
        getattr(keyed, running)().print()
    graph, _ = build_graph(env)
    assert [v.operators[0].kind for v in graph.vertices] == ["source.folder", running]
    assert [e.ship_strategy for e in graph.edges] == [ShipStrategy.HASH]


def test_keyed_stages_one_after_the_other_make_a_line_of_vertices_joined_by_hash_edges():
    env = streaming_env()
    (stamped(env).key_by(1).window(1.0).count(parallelism=3)
        .key_by(lambda window: window[1]).window(1.0).sum(3, parallelism=1)
        .key_by(0).process(lambda record, state: [record])
        .write_text("/tmp/out"))
    graph, _ = build_graph(env)
    assert [[op.kind for op in v.operators] for v in graph.vertices] == [
        ["source.rate", "assign_timestamps"], ["window"], ["window"], ["process", "sink.text"]]
    assert [v.parallelism for v in graph.vertices] == [2, 3, 1, 2]
    assert [e.ship_strategy for e in graph.edges] == [ShipStrategy.HASH] * 3


@pytest.mark.parametrize("declare, complaint", [
    (lambda env: env.rate_source(10).key_by(0).window(5).count().print(),
     "needs event time: call assign_timestamps"),
    (lambda env: env.rate_source(10).key_by(0).count().assign_timestamps(
        lambda r: r[1]).print(), "assign timestamps before the first key_by"),
    (lambda env: stamped(env).assign_timestamps(lambda r: 0).print(),
     "assigns timestamps once"),
    (lambda env: env.rate_source(10).key_by(0).count().key_by(0).window(5).count().print(),
     "needs event time"),
    (lambda env: stamped(env).key_by(0).count().map(str, parallelism=5).print(),
     "one chain of operators per subtask, and one more after each key_by"),
    (lambda env: stamped(env).map(str).slot_sharing_group("other").print(),
     "one chain of operators per subtask"),
    (lambda env: [stream.print() for stream in [stamped(env).map(str)] * 2],
     "one pipeline from one source to one sink"),
    (lambda env: stamped(env).key_by(0).window(5).count().collect(),
     "cannot run in a streaming job yet"),
])
def test_streaming_shapes_not_supported_yet_are_refused_saying_why(declare, complaint):
    env = streaming_env()
    declare(env)
    with pytest.raises(JobDefinitionError, match=complaint):
        build_graph(env)


@pytest.mark.parametrize("declare", [
    lambda env: env.from_range(5).assign_timestamps(float).collect(),
    lambda env: env.from_range(5).map(lambda i: (i, i)).assign_timestamps(
        lambda r: r[0]).key_by(0).window(2).count().collect(),
])
def test_event_time_is_refused_in_a_batch_job(declare):
    env = ExecutionEnvironment("b")
    declare(env)
    with pytest.raises(JobDefinitionError, match="event time, for streaming jobs"):
        build_graph(env)


@pytest.mark.parametrize("call, error, complaint", [
    (lambda s: s.key_by(0).window(0), ValueError, "size is seconds, > 0"),
    (lambda s: s.key_by(0).window(5, 10), ValueError, "at most size"),
    (lambda s: s.key_by(0).window(5, 0), ValueError, "slide is seconds"),
    (lambda s: s.key_by(0).window(5, offset=5), ValueError, "offset is seconds"),
    (lambda s: s.key_by(0).window(5000, 1), ValueError, "each record would be state"),
    (lambda s: s.key_by(0).window(float("inf")), ValueError, "size is seconds"),
    (lambda s: s.assign_timestamps(len, -1), ValueError, "max_out_of_orderness"),
    (lambda s: s.assign_timestamps(3), TypeError, "expected a function"),
    (lambda s: s.key_by(0).window(5).sum(True), TypeError, "field is a name or a position"),
    (lambda s: s.key_by(0).window(5).mean([1]), TypeError, "mean\\(\\): field is a name"),
    (lambda s: s.key_by(0).window(5).aggregate(list, len, None), TypeError, "aggregate"),
    (lambda s: s.key_by(0).window(5).count(paralelism=2), TypeError,
     "did you mean 'parallelism'"),
    (lambda s: s.key_by(0).window(5, sliding=2), TypeError, "window\\(\\) got an unknown"),
])
def test_nonsense_window_arguments_are_refused(call, error, complaint):
    with pytest.raises(error, match=complaint):
        call(streaming_env().rate_source(10))


def test_an_mqtt_source_into_an_mqtt_sink_is_a_streaming_job_with_checked_params():
    env = streaming_env()
    env.mqtt_source("in/+", format="json").map(str).write_mqtt(
        "out", url="mqtts://u:p%40@broker.example:8883", qos=0, retain=True)
    graph, _ = build_graph(env)
    assert graph.kind is JobKind.STREAMING and len(graph.vertices) == 1
    source, _, sink = graph.vertices[0].operators
    assert (source.kind, sink.kind) == ("source.mqtt", "sink.mqtt")
    assert source.params == {"topic": "in/+", "url": None, "qos": 1, "format": "json",
                             "max_buffered": 10_000, "max_payload": 1 << 20}
    assert sink.params == {"topic": "out", "url": "mqtts://u:p%40@broker.example:8883",
                           "qos": 0, "retain": True, "max_inflight": 1000}


@pytest.mark.parametrize(("call", "message"), [
    (lambda env: env.mqtt_source(""), "non-empty"),
    (lambda env: env.mqtt_source("$share/g/t"), "'\\$'"),
    (lambda env: env.mqtt_source("a/#/b"), "no valid topic filter"),
    (lambda env: env.mqtt_source("a+"), "no valid topic filter"),
    (lambda env: env.mqtt_source("t", qos=2), "qos"),
    (lambda env: env.mqtt_source("t", format="xml"), "format"),
    (lambda env: env.mqtt_source("t", url="http://h:1"), "mqtt://"),
    (lambda env: env.mqtt_source("t", max_buffered=0), "max_buffered"),
    (lambda env: env.rate_source(1).write_mqtt("a/+"), "without \\+ or #"),
    (lambda env: env.rate_source(1).write_mqtt("t", max_inflight=True), "max_inflight"),
])
def test_mqtt_arguments_are_checked_when_the_job_is_built(call, message):
    with pytest.raises(ValueError, match=message):
        call(streaming_env())


def test_a_job_may_not_publish_to_a_topic_its_mqtt_source_reads():
    env = streaming_env()
    env.mqtt_source("loop/#").write_mqtt("loop/x")
    with pytest.raises(JobDefinitionError, match="read its own output"):
        build_graph(env)
    env = streaming_env()
    env.mqtt_source("loop/#").write_mqtt("loop/x", url="mqtt://other:1883")
    assert build_graph(env)[0].kind is JobKind.STREAMING  # another broker


def test_write_mqtt_is_refused_in_a_batch_job():
    env = ExecutionEnvironment("b")
    env.from_collection([1]).write_mqtt("t")
    with pytest.raises(JobDefinitionError, match="write_mqtt"):
        build_graph(env)


def test_timestamps_from_a_field_are_declared_by_it_with_no_function():
    env = streaming_env()
    env.rate_source(10).assign_timestamps(field=0, max_out_of_orderness=0.5).key_by(
        1).window(1).count().print()
    graph, code = build_graph(env)
    stamps = graph.vertices[0].operators[1]
    assert stamps.kind == "assign_timestamps"
    assert stamps.params == {"max_out_of_orderness": 0.5, "field": 0}
    assert code[stamps.id].fn is None


@pytest.mark.parametrize("call, complaint", [
    (lambda stream: stream.assign_timestamps(), "either a function or field="),
    (lambda stream: stream.assign_timestamps(float, field=0), "either a function or field="),
    (lambda stream: stream.assign_timestamps(field=True), "a position or a name"),
    (lambda stream: stream.assign_timestamps(field=[0]), "a position or a name"),
])
def test_timestamps_need_a_function_or_a_field_not_both(call, complaint):
    with pytest.raises(TypeError, match=complaint):
        call(streaming_env().rate_source(10))
