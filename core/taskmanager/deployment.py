"""The input partitions of an offloaded deployment, fetched page by page on the slot thread.

A consumer of thousands of producers gets a SubmitTask without its partitions (it would
not fit in one frame); before running, its task asks the JobMaster for them. The slot
thread may block on an ask; the TaskExecutor's main thread never does.
"""

from __future__ import annotations

from dataclasses import replace

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.gateways import JobMasterGateway
from clusterdeck.core.protocol.wiring import EdgeInput, ResultPartitionRef


def with_inputs(deployment: p.SubmitTask, jobmaster: JobMasterGateway) -> p.SubmitTask:
    """The deployment with every input edge's partitions filled in."""
    if not deployment.inputs_offloaded:
        return deployment
    inputs = tuple(replace(edge, partitions=_partitions(deployment, edge, jobmaster))
                   for edge in deployment.inputs)
    return replace(deployment, inputs=inputs, inputs_offloaded=False)


def _partitions(deployment: p.SubmitTask, edge: EdgeInput,
                jobmaster: JobMasterGateway) -> tuple[ResultPartitionRef, ...]:
    partitions: list[ResultPartitionRef] = []
    while True:
        page = jobmaster.request_input_partitions(p.RequestInputPartitions(
            deployment.job_id, deployment.attempt_id, edge.input_index,
            len(partitions))).result()
        partitions.extend(page.partitions)
        if len(partitions) >= page.total or not page.partitions:
            break
    if len(partitions) != page.total:
        raise RuntimeError(f"input {edge.input_index} of {deployment.attempt_id}: got "
                           f"{len(partitions)} of {page.total} partitions")
    return tuple(partitions)
