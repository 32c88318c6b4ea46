"""Declared pipeline -> JobGraph: parallelism defaults, ship strategies, operator chaining.

Like Flink's StreamingJobGraphGenerator, in four steps:

1. keep only operators that lead to a sink (others are never run);
2. give every operator its parallelism: its own, else the environment's, except that a
   sink defaults to its input's (so it chains, and collect() keeps the input's order),
   so does every operator of a streaming job but its keyed one (its vertices are
   chains), and a ``sql`` without ``partition_by`` to 1 (it must see all of its input);
3. pick each connection's ship strategy: HASH into keyed operators, joins and
   partitioned SQL; BROADCAST/REBALANCE where the user asked; otherwise FORWARD when
   both sides have the same parallelism, REBALANCE when they differ;
4. chain: a FORWARD connection whose producer has no other consumer, whose consumer has
   no other input, in the same slot sharing group, fuses the two operators into one
   vertex (one task). Every other connection becomes a JobEdge between vertices.

Operator ids come from declaration order, vertex ids from the first operator of their
chain, so rebuilding the same file on a TaskManager gives the same graph.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.errors import JobDefinitionError
from clusterdeck.core.jobapi.plan import Transformation, UserCode
from clusterdeck.core.protocol.jobgraph import (
    JobEdge,
    JobGraph,
    JobKind,
    JobVertex,
    OperatorSpec,
    ShipStrategy,
)
from clusterdeck.core.rpc import topic_matches

DEFAULT_SLOT_SHARING_GROUP = "default"


def build_graph(env: ExecutionEnvironment) -> tuple[JobGraph, dict[str, UserCode]]:
    """The JobGraph of the pipeline declared on ``env``, and each operator's user code.

    Raises JobDefinitionError when the pipeline cannot run.
    """
    nodes = _reachable_from_sinks(env.transformations)
    streaming = any(t.kind in plan.STREAMING_SOURCES for t in nodes)
    parallelism: dict[str, int] = {}
    for t in nodes:
        parallelism[t.id] = _parallelism(t, env.parallelism, parallelism, streaming)
    groups = _slot_sharing_groups(nodes)
    consumers: dict[str, int] = defaultdict(int)
    for t in nodes:
        for ref in t.inputs:
            consumers[ref.source.id] += 1
    for t in nodes:
        _check(t, parallelism)
        if streaming and t.kind in plan.STREAMING_KEYED \
                and parallelism[t.id] > env.max_parallelism:
            raise JobDefinitionError(f"{t.name!r} has {parallelism[t.id]} subtasks, more than "
                                     f"the job's max parallelism of {env.max_parallelism} "
                                     f"(its key groups): env.set_max_parallelism(n)")

    chain_of: dict[str, list[Transformation]] = {}   # operator id -> its chain
    chains: list[list[Transformation]] = []
    edges: list[tuple[Transformation, Transformation, ShipStrategy, int]] = []
    for t in nodes:
        strategies = [_ship_strategy(ref, t, parallelism) for ref in t.inputs]
        if (len(t.inputs) == 1 and strategies[0] is ShipStrategy.FORWARD
                and consumers[t.inputs[0].source.id] == 1
                and groups[t.inputs[0].source.id] == groups[t.id]):
            chain = chain_of[t.inputs[0].source.id]
            chain.append(t)
        else:
            chain = [t]
            chains.append(chain)
            edges.extend((ref.source, t, strategy, index)
                         for index, (ref, strategy) in enumerate(zip(t.inputs, strategies,
                                                                     strict=True)))
        chain_of[t.id] = chain

    vertex_of = {t.id: plan.vertex_id(chain_of[t.id][0].seq) for t in nodes}
    vertices = tuple(
        JobVertex(id=vertex_of[chain[0].id], name=" -> ".join(t.name for t in chain),
                  parallelism=parallelism[chain[0].id],
                  operators=tuple(OperatorSpec(t.id, t.kind, t.name, dict(t.params))
                                  for t in chain),
                  slot_sharing_group=groups[chain[0].id])
        for chain in chains)
    job_edges = tuple(JobEdge(vertex_of[source.id], vertex_of[target.id], strategy, index)
                      for source, target, strategy, index in edges)
    if streaming:
        _check_streaming(nodes, job_edges, env)
    elif any(t.kind == plan.SINK_PRINT for t in nodes):
        raise JobDefinitionError("print() is a sink of streaming jobs; a batch job's records "
                                 "come back to the client with collect()")
    elif any(t.kind == plan.SINK_MQTT for t in nodes):
        raise JobDefinitionError("write_mqtt() is a sink of streaming jobs (its guarantee "
                                 "rests on checkpoints); a batch job writes files or "
                                 "collects")
    else:
        for t in nodes:
            if t.kind in plan.STREAMING_ONLY:
                raise JobDefinitionError(
                    f"{t.name!r} ({t.kind}) is event time, for streaming jobs "
                    "(rate_source, folder_source); a batch job groups with key_by and "
                    "reduce/sum/count/aggregate, or sql")
    graph = JobGraph(name=env.job_name, kind=JobKind.STREAMING if streaming else JobKind.DATAFLOW,
                     vertices=vertices, edges=job_edges, default_parallelism=env.parallelism,
                     checkpointing=env.checkpointing if streaming else None,
                     max_parallelism=env.max_parallelism)
    return graph, {t.id: t.code for t in nodes}


_STREAMING_SHAPE = (
    "rate_source()|folder_source()|mqtt_source() -> "
    "[map/flat_map/filter/map_batches/assign_timestamps]* "
    "-> [key_by() -> window(...).count()|sum()|reduce()|aggregate() or reduce()|sum()|count()"
    "|process() -> [map/flat_map/filter/map_batches]*]* -> write_text()|print()|write_mqtt()")


def _check_streaming(nodes: list[Transformation], edges: tuple[JobEdge, ...],
                     env: ExecutionEnvironment) -> None:
    """What a streaming job may hold today (docs/streaming.md): one pipeline from a
    source through map/flat_map/filter/map_batches/assign_timestamps, then any number of
    key_by stages, each a keyed window, running aggregate or process function with
    map/flat_map/filter/map_batches after it, into a sink: a line of vertices joined by
    HASH edges."""
    for t in nodes:
        allowed = (plan.STREAMING_SOURCES if t.is_source else plan.STREAMING_SINKS
                   if t.is_sink else plan.STREAMING_OPERATORS | plan.STREAMING_KEYED)
        if t.kind not in allowed:
            raise JobDefinitionError(
                f"{t.name!r} ({t.kind}) cannot run in a streaming job yet: a streaming job is "
                f"{_STREAMING_SHAPE} for now (docs/streaming.md)")
    _check_streaming_order(_pipeline(nodes))
    if any(edge.ship_strategy is not ShipStrategy.HASH for edge in edges):
        raise JobDefinitionError(
            "a streaming job runs as one chain of operators per subtask, and one more after "
            "each key_by, for now: give every operator before a key_by the parallelism of "
            "the one before it, with no rebalance, broadcast or slot sharing group in "
            "between (docs/streaming.md)")
    watched = {t.params["path"] for t in nodes if t.kind == plan.SOURCE_FOLDER}
    for t in nodes:
        if t.kind == plan.SINK_TEXT and t.params["path"] in watched:
            raise JobDefinitionError(
                f"{t.name!r} writes into the folder its job watches ({t.params['path']}): "
                "the job would read its own output again; write elsewhere")
    _check_mqtt_loop(nodes)
    if env.checkpointing is None:
        raise JobDefinitionError(
            "a streaming job restores its sources from its checkpoints, and its file sink "
            "makes its output visible with each completed one: call "
            "env.enable_checkpointing(interval) (docs/streaming.md)")


def _check_mqtt_loop(nodes: list[Transformation]) -> None:
    """A job may not publish to a topic its own MQTT source reads on the same broker: it
    would read its own output again, for ever."""
    reads = [t.params for t in nodes if t.kind == plan.SOURCE_MQTT]
    for t in nodes:
        if t.kind != plan.SINK_MQTT:
            continue
        for source in reads:
            if source["url"] == t.params["url"] and topic_matches(source["topic"],
                                                                   t.params["topic"]):
                raise JobDefinitionError(
                    f"{t.name!r} publishes to {t.params['topic']!r}, which its job's MQTT "
                    f"source reads ({source['topic']!r}): the job would read its own output "
                    "again; publish elsewhere")


def _pipeline(nodes: list[Transformation]) -> list[Transformation]:
    """The operators of a streaming job from its source to its sink, which must be one
    line: one source, one sink, no operator feeding two or reading two."""
    consumers: dict[str, list[Transformation]] = defaultdict(list)
    for t in nodes:
        for ref in t.inputs:
            consumers[ref.source.id].append(t)
    sources = [t for t in nodes if t.is_source]
    if len(sources) != 1 or any(len(t.inputs) > 1 or len(consumers[t.id]) > 1 for t in nodes):
        raise JobDefinitionError(
            "a streaming job is one pipeline from one source to one sink for now, with no "
            f"operator feeding two or reading two: {_STREAMING_SHAPE} (docs/streaming.md)")
    line = [sources[0]]
    while consumers[line[-1].id]:
        line.append(consumers[line[-1].id][0])
    return line


def _check_streaming_order(line: list[Transformation]) -> None:
    """Event time assigned at most once, before the first keyed operator (a window, a
    running aggregate or a process function); every window after it."""
    keyed = [t for t in line if t.kind in plan.STREAMING_KEYED]
    stamps = [t for t in line if t.kind == plan.ASSIGN_TIMESTAMPS]
    if len(stamps) > 1:
        raise JobDefinitionError(
            f"{stamps[1].name!r}: a streaming job assigns timestamps once, before its "
            "first key_by")
    first = line.index(keyed[0]) if keyed else len(line)
    if stamps and line.index(stamps[0]) > first:
        raise JobDefinitionError(
            f"{stamps[0].name!r} comes after the keyed operator {keyed[0].name!r}: assign "
            "timestamps before the first key_by (docs/streaming.md)")
    windows = [t for t in keyed if t.kind == plan.WINDOW]
    if windows and not stamps:
        raise JobDefinitionError(
            f"window {windows[0].name!r} needs event time: call assign_timestamps(fn) "
            "before key_by, so records carry their time and the stream a watermark "
            "(docs/streaming.md)")


def _reachable_from_sinks(transformations: tuple[Transformation, ...]) -> list[Transformation]:
    sinks = [t for t in transformations if t.is_sink]
    if not sinks:
        raise JobDefinitionError(
            "the pipeline has no sink: end it with write_text, write_csv, write_parquet or "
            "collect")
    keep: set[str] = set()
    pending = list(sinks)
    while pending:
        t = pending.pop()
        if t.id not in keep:
            keep.add(t.id)
            pending.extend(ref.source for ref in t.inputs)
    return [t for t in transformations if t.id in keep]


def _parallelism(t: Transformation, default: int, resolved: Mapping[str, int],
                 streaming: bool = False) -> int:
    if t.parallelism is not None:
        return t.parallelism
    if t.is_sink:
        return resolved[t.inputs[0].source.id]
    if streaming and len(t.inputs) == 1 and t.kind not in plan.STREAMING_KEYED:
        return resolved[t.inputs[0].source.id]  # chains: a streaming job has no REBALANCE
    if t.kind == plan.SQL and not t.params.get("partition_by"):
        return 1
    return default


def _slot_sharing_groups(nodes: list[Transformation]) -> Mapping[str, str]:
    """An operator's own group, else its inputs' group when they agree (as Flink)."""
    groups: dict[str, str] = {}
    for t in nodes:
        inherited = {groups[ref.source.id] for ref in t.inputs}
        groups[t.id] = t.slot_sharing_group or (
            inherited.pop() if len(inherited) == 1 else DEFAULT_SLOT_SHARING_GROUP)
    return groups


def _ship_strategy(ref: plan.InputRef, consumer: Transformation,
                   parallelism: Mapping[str, int]) -> ShipStrategy:
    if ref.partitioning == plan.HASH:
        return ShipStrategy.HASH
    if ref.partitioning == plan.BROADCAST:
        return ShipStrategy.BROADCAST
    if ref.partitioning == plan.REBALANCE:
        return ShipStrategy.REBALANCE
    if parallelism[ref.source.id] == parallelism[consumer.id]:
        return ShipStrategy.FORWARD
    return ShipStrategy.REBALANCE


def _check(t: Transformation, parallelism: Mapping[str, int]) -> None:
    if t.kind == plan.SQL and parallelism[t.id] > 1 and not t.params["partition_by"]:
        spread = [ref for ref in t.inputs if ref.partitioning != plan.BROADCAST]
        if len(spread) > 1:
            raise JobDefinitionError(
                f"sql {t.name!r} runs with parallelism {parallelism[t.id]} over several "
                "inputs: give partition_by= (the columns it joins or groups by), broadcast() "
                "all inputs but one, or leave its parallelism at 1")
