"""The ExecutionGraph: expansion of a JobGraph, partition wiring, snapshot and progress."""

import pytest

from clusterdeck.core.executiongraph import (
    EdgeOutput,
    ExecutionGraph,
    ExecutionState,
    ResultPartitionRef,
)
from clusterdeck.core.protocol.jobgraph import JobEdge, JobGraph, JobKind, ShipStrategy
from clusterdeck.core.protocol.snapshots import JobProgress, SlotSnapshot
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.protocol.wiring import consumed_partitions
from tests.unit.core.executiongraph.helpers import (
    JOB_ID,
    Harness,
    three_stages,
    through_the_wire,
    word_count,
)

S = ExecutionState


def test_each_vertex_is_expanded_into_one_subtask_per_parallel_instance():
    graph = ExecutionGraph(word_count(sources=3, reducers=2), JOB_ID)

    assert [s.id for s in graph.vertex("source").subtasks] == ["source#0", "source#1", "source#2"]
    assert [s.id for s in graph.vertex("reduce").subtasks] == ["reduce#0", "reduce#1"]


def test_every_subtask_starts_with_attempt_zero_in_created():
    graph = ExecutionGraph(word_count(), JOB_ID)

    assert all(e.attempt == 0 and e.state is S.CREATED for e in graph.current_executions())


def test_an_attempt_id_names_the_job_the_subtask_and_the_attempt():
    graph = ExecutionGraph(word_count(), JOB_ID)

    assert graph.subtask("reduce", 1).current.attempt_id == "job-1/reduce#1/a0"
    assert graph.execution("job-1/reduce#1/a0") is graph.subtask("reduce", 1).current


def test_vertices_are_kept_producers_first():
    graph = ExecutionGraph(three_stages(), JOB_ID)

    assert list(graph.vertices) == ["source", "map", "sink"]


def test_a_forward_edge_between_different_parallelisms_is_refused():
    with pytest.raises(ValueError, match="FORWARD"):
        ExecutionGraph(word_count(sources=3, reducers=2, strategy=ShipStrategy.FORWARD), JOB_ID)


def test_a_cyclic_job_graph_is_refused():
    graph = word_count()
    cyclic = JobGraph(graph.name, JobKind.DATAFLOW, graph.vertices,
                      (*graph.edges, JobEdge("reduce", "source", ShipStrategy.HASH)))

    with pytest.raises(ValueError, match="cycle"):
        ExecutionGraph(cyclic, JOB_ID)


def test_a_forward_consumer_reads_partition_zero_of_its_own_producer():
    assert consumed_partitions(ShipStrategy.FORWARD, 1, producer_parallelism=2) == [(1, 0)]


@pytest.mark.parametrize("strategy", [ShipStrategy.HASH, ShipStrategy.REBALANCE])
def test_a_hash_or_rebalance_consumer_reads_its_own_partition_of_every_producer(strategy):
    assert consumed_partitions(strategy, 1, producer_parallelism=3) == [(0, 1), (1, 1), (2, 1)]


def test_a_broadcast_consumer_reads_the_single_partition_of_every_producer():
    assert consumed_partitions(ShipStrategy.BROADCAST, 1, producer_parallelism=3) == [
        (0, 0), (1, 0), (2, 0)]


@pytest.mark.parametrize(("strategy", "partitions"), [
    (ShipStrategy.HASH, 2), (ShipStrategy.REBALANCE, 2), (ShipStrategy.BROADCAST, 1)])
def test_a_producer_writes_one_partition_per_consumer_subtask_only_when_it_partitions(
        strategy, partitions):
    graph = ExecutionGraph(word_count(sources=3, reducers=2, strategy=strategy), JOB_ID)

    assert graph.output_partitions("source") == (EdgeOutput("reduce", strategy, partitions),)


def test_input_partitions_name_the_current_attempts_of_the_producers():
    graph = ExecutionGraph(word_count(sources=2, reducers=2), JOB_ID)

    (edge_input,) = graph.input_partitions("reduce", 1)
    assert edge_input.source_vertex_id == "source"
    assert edge_input.partitions == (
        ResultPartitionRef("job-1/source#0/a0", "source", 0, 1),
        ResultPartitionRef("job-1/source#1/a0", "source", 1, 1))


def test_inputs_are_available_only_once_every_producer_has_finished():
    harness = Harness(word_count(sources=2, reducers=1))
    harness.start()
    harness.grant_slots()
    first, second = harness.attempt("source", 0), harness.attempt("source", 1)

    assert harness.graph.inputs_available("source")
    harness.report(first, S.FINISHED)
    assert not harness.graph.inputs_available("reduce")
    harness.report(second, S.FINISHED)
    assert harness.graph.inputs_available("reduce")


def test_progress_counts_finished_subtasks_out_of_all():
    harness = Harness(word_count(sources=3, reducers=2))
    harness.start()
    harness.grant_slots()
    harness.report(harness.attempt("source", 0), S.FINISHED)

    assert harness.graph.progress() == (1, 5)


def test_the_snapshot_is_json_and_enough_to_redraw_the_graph():
    harness = Harness(word_count(sources=3, reducers=2))
    harness.start()
    harness.grant_slots()

    snapshot = through_the_wire(harness.graph.snapshot())

    assert snapshot.job_id == JOB_ID
    assert snapshot.status is JobStatus.RUNNING
    assert snapshot.progress == JobProgress(finished=0, total=5)
    assert [(v.id, v.name, v.parallelism) for v in snapshot.vertices] == [
        ("source", "Source", 3), ("reduce", "Reduce", 2)]
    assert snapshot.edges == (JobEdge(source="source", target="reduce",
                                      ship_strategy=ShipStrategy.HASH, input_index=0),)
    source0 = snapshot.vertices[0].subtasks[0]
    assert source0.state is ExecutionState.DEPLOYING
    assert source0.attempt_id == "job-1/source#0/a0"
    assert source0.attempts[0].slot == SlotSnapshot(taskmanager_id="tm-1", slot_index=0)
    assert snapshot.vertices[0].state_counts == {ExecutionState.DEPLOYING: 3}
    assert snapshot.vertices[1].state_counts == {ExecutionState.CREATED: 2}
    assert snapshot.failures == () and snapshot.root_cause is None
