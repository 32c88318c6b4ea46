"""An offloaded deployment's input partitions, assembled from the JobMaster's pages."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind, ShipStrategy
from clusterdeck.core.protocol.wiring import EdgeInput, ResultPartitionRef
from clusterdeck.core.taskmanager.deployment import with_inputs

REFS = tuple(ResultPartitionRef(f"a/{i}", "source", i, 0, "tm") for i in range(7))


class PagingJobMaster:
    """Answers like JobMaster.request_input_partitions, ``page`` partitions at a time."""

    def __init__(self, page: int, refs: tuple[ResultPartitionRef, ...] = REFS) -> None:
        self.page, self.refs, self.asked = page, refs, []

    def request_input_partitions(self, request: p.RequestInputPartitions
                                 ) -> Future[p.InputPartitions]:
        self.asked.append(request.offset)
        future: Future[p.InputPartitions] = Future()
        future.set_result(p.InputPartitions(
            self.refs[request.offset:request.offset + self.page], len(REFS)))
        return future


def deployment(offloaded: bool) -> p.SubmitTask:
    edge = EdgeInput(0, "source", ShipStrategy.REBALANCE, () if offloaded else REFS)
    graph = JobGraph("j", JobKind.DATAFLOW, ())
    return p.SubmitTask("job", graph, "attempt", "sink", 0, 1, 0, 0, "alloc", "jobmaster.job",
                        "token", "sha", "/work", inputs=(edge,), inputs_offloaded=offloaded)


def test_an_offloaded_deployment_gets_every_partition_in_order_page_by_page() -> None:
    jobmaster = PagingJobMaster(page=3)
    resolved = with_inputs(deployment(offloaded=True), jobmaster)  # type: ignore[arg-type]
    assert resolved.inputs[0].partitions == REFS
    assert not resolved.inputs_offloaded
    assert jobmaster.asked == [0, 3, 6]


def test_a_deployment_with_its_partitions_asks_nothing() -> None:
    jobmaster = PagingJobMaster(page=3)
    assert with_inputs(deployment(offloaded=False), jobmaster) == deployment(False)  # type: ignore[arg-type]
    assert jobmaster.asked == []


def test_pages_that_stop_short_fail_the_task_with_the_count() -> None:
    jobmaster = PagingJobMaster(page=3, refs=REFS[:4])
    with pytest.raises(RuntimeError, match="got 4 of 7 partitions"):
        with_inputs(deployment(offloaded=True), jobmaster)  # type: ignore[arg-type]
