"""Reactive mode's planning (core/jobmanager/reactive.py): the parallelism the slots
allow, the jobs it refuses, and the wait for the slots to settle."""

from __future__ import annotations

import pytest

from clusterdeck.core.jobmanager.admission import SubmissionRefused
from clusterdeck.core.jobmanager.reactive import (
    Settling,
    reactive_graph,
    reactive_parallelism,
    reactive_refusal,
    same_but_parallelism,
)
from clusterdeck.core.protocol.jobgraph import (
    JobEdge,
    JobGraph,
    JobKind,
    JobVertex,
    OperatorSpec,
    ShipStrategy,
)
from tests.unit.core.jobmanager.test_dispatcher_bounds import Harness


def keyed(parallelism: int = 1, source: str = "source.rate", max_parallelism: int = 128
          ) -> JobGraph:
    """Source -> keyed process + file sink: two vertices, a HASH edge between them."""
    return JobGraph("keyed", JobKind.STREAMING, (
        JobVertex("v1", "rate", parallelism, (OperatorSpec("op1", source, "rate"),)),
        JobVertex("v2", "process -> write", parallelism,
                  (OperatorSpec("op2", "process", "process"),
                   OperatorSpec("op3", "sink.text", "write")))),
        (JobEdge("v1", "v2", ShipStrategy.HASH),), max_parallelism=max_parallelism)


def test_the_slots_are_shared_evenly_over_the_vertices():
    assert [reactive_parallelism(keyed(), slots, 10_000) for slots in (1, 2, 3, 4, 7)] \
        == [0, 1, 1, 2, 3]


def test_the_parallelism_stays_within_the_key_groups_and_the_cluster_bound():
    assert reactive_parallelism(keyed(max_parallelism=4), 100, 10_000) == 4
    assert reactive_parallelism(keyed(), 100, 3) == 3


def test_a_graph_is_replanned_only_when_its_parallelism_changes():
    wider = reactive_graph(keyed(1), 4, 10_000)
    assert wider is not None
    assert [v.parallelism for v in wider.vertices] == [2, 2]
    assert wider.default_parallelism == 2 and wider.edges == keyed().edges
    assert reactive_graph(wider, 5, 10_000) is None  # 5 // 2 == 2: nothing to change
    assert reactive_graph(wider, 1, 10_000) is None  # fewer slots than vertices: wait


def test_a_replanned_graph_is_the_same_job_but_for_its_parallelism():
    wider = reactive_graph(keyed(1), 6, 10_000)
    assert wider is not None and same_but_parallelism(keyed(1), wider)
    assert not same_but_parallelism(keyed(1), keyed(1, source="source.folder"))


def test_sources_whose_position_cannot_be_redistributed_are_refused_with_why():
    assert reactive_refusal(keyed()) is None
    assert "watched folder" in reactive_refusal(keyed(source="source.folder"))
    assert "MQTT" in reactive_refusal(keyed(source="source.mqtt"))
    batch = JobGraph("batch", JobKind.DATAFLOW, keyed(source="source.folder").vertices)
    assert reactive_refusal(batch) is None  # batch jobs are not rescaled


def test_changes_are_due_together_once_none_came_for_the_wait():
    settling = Settling(3.0)
    assert settling.settled(0.0) is None  # nothing changed
    assert settling.changed("taskmanager-2 registered", 10.0) == 13.0
    assert settling.changed("taskmanager-3 registered", 12.0) == 15.0  # the wait again
    assert settling.settled(13.0) is None
    assert settling.settled(15.0) == ("taskmanager-2 registered", "taskmanager-3 registered")
    assert settling.settled(20.0) is None  # forgotten once due


def test_a_change_without_a_reason_names_the_slot_count():
    settling = Settling(0.0)
    settling.changed("", 1.0)
    reasons = settling.settled(1.0)
    assert reasons == () and Settling.describe(reasons, 4) == "the cluster has 4 slots"
    many = tuple(f"taskmanager-{i} lost" for i in range(6))
    assert Settling.describe(many, 2).endswith("taskmanager-3 lost and 2 more")


def test_a_reactive_dispatcher_plans_a_new_job_on_the_slots_it_heard_of(tmp_path):
    dispatcher = Harness(tmp_path, 0, **{"scheduler.mode": "reactive"}).dispatcher
    assert dispatcher._reactive_start(keyed(3)) == keyed(3)  # no slots heard of yet
    dispatcher._slots_total = 4  # as the cluster's overview said
    assert [v.parallelism for v in dispatcher._reactive_start(keyed(3)).vertices] == [2, 2]
    with pytest.raises(SubmissionRefused, match="reactive: vertex rate reads a watched"):
        dispatcher._reactive_start(keyed(source="source.folder"))
