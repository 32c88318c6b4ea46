"""The Dispatcher refuses a submission it cannot store and run, before anything is kept."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobmanager.admission import (
    SubmissionRefused,
    check_slots,
    check_submission,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import (
    JobEdge,
    JobGraph,
    JobKind,
    JobVertex,
    OperatorSpec,
    ShipStrategy,
)

SOURCE = JobVertex("source", "source", 2, (OperatorSpec("op-1", "source.range", "range"),))
SINK = JobVertex("sink", "sink", 1, (OperatorSpec("op-2", "sink.collect", "collect"),))
GRAPH = JobGraph("job", JobKind.DATAFLOW, (SOURCE, SINK),
                 (JobEdge("source", "sink", ShipStrategy.REBALANCE),))
REQUEST = p.SubmitJob("0123456789abcdef", GRAPH, "upload", "sha")


def refusal(request: p.SubmitJob, max_parallelism: int = 100) -> str:
    with pytest.raises(SubmissionRefused) as refused:
        check_submission(request, max_parallelism)
    return str(refused.value)


def test_a_well_formed_submission_passes() -> None:
    check_submission(REQUEST, 100)


@pytest.mark.parametrize("job_id", ["../../x", "", "a/b", ".hidden", "x" * 65, "é"])
def test_a_job_id_that_is_not_a_plain_name_is_refused(job_id: str) -> None:
    assert "job id" in refusal(replace(REQUEST, job_id=job_id))


@pytest.mark.parametrize("parallelism", [0, -1, 101])
def test_parallelism_outside_one_to_the_maximum_is_refused(parallelism: int) -> None:
    graph = replace(GRAPH, vertices=(replace(SOURCE, parallelism=parallelism), SINK))
    assert "jobmanager.max-parallelism" in refusal(replace(REQUEST, graph=graph))


def test_a_cycle_is_refused() -> None:
    edges = (*GRAPH.edges, JobEdge("sink", "source", ShipStrategy.REBALANCE))
    assert "cycle" in refusal(replace(REQUEST, graph=replace(GRAPH, edges=edges)))


def test_edges_must_join_known_vertices_and_be_wirable() -> None:
    unknown = (JobEdge("source", "nowhere", ShipStrategy.HASH),)
    assert "nowhere" in refusal(replace(REQUEST, graph=replace(GRAPH, edges=unknown)))
    forward = (JobEdge("source", "sink", ShipStrategy.FORWARD),)
    assert "FORWARD" in refusal(replace(REQUEST, graph=replace(GRAPH, edges=forward)))


def test_an_empty_graph_or_an_empty_vertex_is_refused() -> None:
    assert "no vertices" in refusal(replace(REQUEST, graph=replace(GRAPH, vertices=(),
                                                                   edges=())))
    empty = replace(SINK, operators=())
    assert "no operators" in refusal(replace(REQUEST, graph=replace(
        GRAPH, vertices=(SOURCE, empty))))


def test_per_job_options_are_restart_options_with_finite_values() -> None:
    assert "rpc.framesize" in refusal(replace(REQUEST, restart_strategy={"rpc.framesize": 1}))
    assert "finite" in refusal(replace(
        REQUEST, restart_strategy={"restart-strategy.fixed-delay.delay": float("inf")}))
    assert "timeout" in refusal(replace(REQUEST, task_timeout=float("nan")))


ELASTIC = Config({"elastic.provider": "local", "elastic.max-taskmanagers": 3,
                  "taskmanager.slots": 2})


def test_a_streaming_job_wider_than_the_most_slots_there_can_be_is_refused() -> None:
    streaming = replace(GRAPH, kind=JobKind.STREAMING,
                        vertices=(replace(SOURCE, parallelism=6), SINK))
    with pytest.raises(SubmissionRefused, match=r"needs 7 slots at once .* at most 6"):
        check_slots(streaming, ELASTIC)
    check_slots(replace(streaming, vertices=(replace(SOURCE, parallelism=5), SINK)), ELASTIC)


def test_a_batch_job_runs_in_waves_and_a_cluster_without_provider_has_no_known_maximum(
        ) -> None:
    wide = (replace(SOURCE, parallelism=50), SINK)
    check_slots(replace(GRAPH, vertices=wide), ELASTIC)
    check_slots(replace(GRAPH, kind=JobKind.STREAMING, vertices=wide), Config({}))
