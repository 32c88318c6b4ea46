"""The dataflow API and the builder: ids, parallelism, ship strategies, chaining."""

from __future__ import annotations

import json

import pytest

from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.errors import JobDefinitionError
from clusterdeck.core.protocol.jobgraph import JobGraph, ShipStrategy


def wordcount(env: ExecutionEnvironment) -> None:
    (env.read_text("/data/*.txt", name="lines")
        .flat_map(str.split, name="split")
        .map(lambda w: (w, 1), name="pair")
        .key_by(0).sum(1, name="count")
        .collect(name="counts"))


def graph_of(declare, parallelism: int = 1) -> JobGraph:
    env = ExecutionEnvironment("test")
    env.set_parallelism(parallelism)
    declare(env)
    return build_graph(env)[0]


def edges(graph: JobGraph) -> list[tuple[str, str, ShipStrategy, int]]:
    return [(e.source, e.target, e.ship_strategy, e.input_index) for e in graph.edges]


def chains(graph: JobGraph) -> list[list[str]]:
    return [[op.name for op in v.operators] for v in graph.vertices]


def test_operator_ids_follow_declaration_order_and_are_stable_across_rebuilds():
    first, second = graph_of(wordcount, 3), graph_of(wordcount, 3)
    assert first == second
    assert [op.id for v in first.vertices for op in v.operators] == [
        "op-1", "op-2", "op-3", "op-4", "op-5"]


def test_forward_operators_with_equal_parallelism_chain_into_one_vertex():
    graph = graph_of(wordcount, 3)
    assert chains(graph) == [["lines", "split", "pair"], ["count", "counts"]]
    assert [v.parallelism for v in graph.vertices] == [3, 3]


def test_vertex_names_join_the_operator_names_of_their_chain():
    graph = graph_of(wordcount)
    assert [v.name for v in graph.vertices] == ["lines -> split -> pair", "count -> counts"]
    assert [v.id for v in graph.vertices] == ["vertex-1", "vertex-4"]


def test_key_by_makes_a_hash_edge_and_starts_a_new_vertex():
    graph = graph_of(wordcount, 2)
    assert edges(graph) == [("vertex-1", "vertex-4", ShipStrategy.HASH, 0)]
    assert graph.vertex("vertex-4").operators[0].params["key"] == {"fields": [0]}


def test_a_parallelism_change_makes_a_rebalance_edge():
    def declare(env):
        env.from_range(100, parallelism=2).map(abs, parallelism=3).collect()

    graph = graph_of(declare)
    assert edges(graph) == [("vertex-1", "vertex-2", ShipStrategy.REBALANCE, 0)]
    assert chains(graph) == [["from_range"], ["map", "collect"]]


def test_rebalance_and_broadcast_are_kept_at_equal_parallelism():
    def declare(env):
        env.from_range(10).rebalance().map(abs).collect()
        env.from_range(10).broadcast().filter(bool).collect()

    graph = graph_of(declare, 2)
    assert [e.ship_strategy for e in graph.edges] == [ShipStrategy.REBALANCE,
                                                      ShipStrategy.BROADCAST]


def test_a_producer_with_two_consumers_is_not_chained():
    def declare(env):
        numbers = env.from_range(10).map(abs)
        numbers.collect(name="all")
        numbers.write_text("/out", name="text")

    graph = graph_of(declare, 2)
    assert chains(graph) == [["from_range", "map"], ["all"], ["text"]]
    assert [e.ship_strategy for e in graph.edges] == [ShipStrategy.FORWARD] * 2


def test_join_hashes_both_inputs_in_input_order():
    def declare(env):
        orders = env.read_csv("/orders.csv", name="orders")
        users = env.read_csv("/users.csv", name="users")
        orders.join(users, on="user_id").collect()

    graph = graph_of(declare, 2)
    assert edges(graph) == [("vertex-1", "vertex-3", ShipStrategy.HASH, 0),
                            ("vertex-2", "vertex-3", ShipStrategy.HASH, 1)]
    join = graph.vertex("vertex-3").operators[0]
    assert join.params == {"left_on": ["user_id"], "right_on": ["user_id"], "how": "inner",
                           "same_keys": True}


def test_broadcast_join_ships_the_small_side_whole_and_the_big_side_forward():
    def declare(env):
        big = env.from_range(1000)
        small = env.from_collection([(1, "a")])
        big.join(small.broadcast(), left_on="value", right_on="_1", how="left").collect()

    assert [e.ship_strategy for e in graph_of(declare, 2).edges] == [
        ShipStrategy.FORWARD, ShipStrategy.BROADCAST]


def test_a_broadcast_right_side_cannot_be_outer_joined_from_the_right():
    env = ExecutionEnvironment()
    with pytest.raises(ValueError, match="broadcast right side"):
        env.from_range(3).join(env.from_range(3).broadcast(), on="value", how="full")


def test_sql_runs_in_one_subtask_unless_partitioned():
    def declare(env):
        numbers = env.from_range(10)
        numbers.sql("SELECT value FROM input", name="all").collect()
        numbers.sql("SELECT value, COUNT(*) FROM input GROUP BY value", partition_by="value",
                    name="keyed").collect()

    graph = graph_of(declare, 3)
    by_name = {v.operators[0].name: v for v in graph.vertices}
    assert by_name["all"].parallelism == 1
    assert by_name["keyed"].parallelism == 3
    assert {(e.target, e.ship_strategy) for e in graph.edges} == {
        (by_name["all"].id, ShipStrategy.REBALANCE), (by_name["keyed"].id, ShipStrategy.HASH)}


def test_parallel_sql_over_two_unkeyed_inputs_is_refused():
    def declare(env):
        a, b = env.from_range(3), env.from_range(3)
        a.sql("SELECT * FROM input JOIN b USING (value)", tables={"b": b},
              parallelism=2).collect()

    with pytest.raises(JobDefinitionError, match="partition_by"):
        graph_of(declare)


def test_sinks_default_to_their_inputs_parallelism_and_chain():
    def declare(env):
        env.from_range(10, parallelism=3).collect()

    graph = graph_of(declare, 2)
    assert chains(graph) == [["from_range", "collect"]]
    assert graph.vertices[0].parallelism == 3


def test_operators_that_reach_no_sink_are_left_out():
    def declare(env):
        env.from_range(10).map(abs)
        env.from_range(5).collect()

    graph = graph_of(declare)
    assert chains(graph) == [["from_range", "collect"]]
    assert graph.vertices[0].id == "vertex-3"


def test_a_pipeline_without_sink_is_refused():
    with pytest.raises(JobDefinitionError, match="no sink"):
        graph_of(lambda env: env.from_range(3).map(abs))


def test_slot_sharing_groups_break_chains_and_are_inherited():
    def declare(env):
        env.from_range(10).map(abs).slot_sharing_group("heavy").filter(bool).collect()

    graph = graph_of(declare)
    assert chains(graph) == [["from_range"], ["map", "filter", "collect"]]
    assert [v.slot_sharing_group for v in graph.vertices] == ["default", "heavy"]


def test_an_unknown_keyword_argument_names_the_operator_and_the_likely_one():
    env = ExecutionEnvironment()
    with pytest.raises(TypeError, match=r"map\(\) got an unknown argument 'paralelism' "
                                        r"\(did you mean 'parallelism'\?\)"):
        env.from_range(3).map(abs, paralelism=2)
    with pytest.raises(TypeError, match=r"read_csv\(\) got an unknown argument 'sep'"):
        env.read_csv("/x.csv", sep=";")


def test_a_bad_parallelism_or_function_is_refused_when_declared():
    env = ExecutionEnvironment()
    with pytest.raises(ValueError, match="parallelism must be a whole number"):
        env.from_range(3).map(abs, parallelism=0)
    with pytest.raises(TypeError, match="expected a function"):
        env.from_range(3).map(42)
    with pytest.raises(ValueError, match="aggregate"):
        env.from_range(3).key_by(0).aggregate({"x": ("value", "median")})


def test_the_graph_is_data_only_and_round_trips_through_json():
    graph = graph_of(wordcount, 4)
    data = json.loads(json.dumps(graph.to_dict()))
    assert JobGraph.from_dict(data) == graph


def test_paths_are_made_absolute_when_declared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    graph = graph_of(lambda env: env.read_text("in/*.txt").write_csv("out"))
    assert graph.vertices[0].operators[0].params["paths"] == [str(tmp_path / "in/*.txt")]
    assert graph.vertices[0].operators[-1].params["path"] == str(tmp_path / "out")


def test_user_code_is_found_by_operator_id():
    env = ExecutionEnvironment()
    env.from_collection([1, 2]).map(abs).key_by(lambda x: x % 2).reduce(max).collect()
    graph, code = build_graph(env)
    assert code["op-1"].items == [1, 2]
    assert code["op-2"].fn is abs
    assert code["op-3"].fn is max and code["op-3"].keys[0](3) == 1
    assert graph.vertex("vertex-3").operators[0].params["key"] == {"function": True}


def test_counters_are_shared_by_name_and_count_locally_outside_spark():
    env = ExecutionEnvironment()
    counter = env.counter("bad")
    counter.add(2)
    env.counter("bad").add()
    assert env.counter("bad") is counter and counter.value == 3
    assert env.counter_names == ("bad",)
