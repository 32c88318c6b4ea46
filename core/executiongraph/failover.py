"""Failover regions: which subtasks must run again so that a failed one can succeed.

In a blocking batch job every exchange is materialised, so a failed subtask can simply
run again as long as the partitions it reads still exist. They live in the cluster's
shared work directory and outlive the attempt (and the TaskManager) that wrote them, so
a region is usually just the failed subtasks. The walks are for partitions that do get
lost (a TaskManager's local disk, or files a consumer could not find or read, which it
reports as PartitionNotFound), following Flink's restart-pipelined-region strategy:
upstream, a producer whose partitions are gone joins the region (and so, recursively, do
its own producers with lost partitions); downstream, a consumer that already started
reading a partition that will be produced again joins it too, since it must read the
new one.
"""

from __future__ import annotations

from collections.abc import Iterable

from clusterdeck.core.executiongraph.execution import ExecutionVertex
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.protocol.states import ExecutionState

_NOT_STARTED_OR_DONE = frozenset({ExecutionState.CREATED, ExecutionState.FINISHED})


def failover_region(graph: ExecutionGraph,
                    failed: Iterable[ExecutionVertex]) -> list[ExecutionVertex]:
    """``failed`` plus the producers whose partitions must be computed again and the
    started consumers of anything recomputed, in topological order."""
    region = {subtask.id: subtask for subtask in failed}
    stack = list(region.values())
    while stack:
        subtask = stack.pop()
        upstream = [p for p in graph.producers_of(subtask)
                    if p.current.state is ExecutionState.FINISHED and p.current.partitions_lost]
        downstream = [c for c in graph.consumers_reading(subtask)
                      if c.current.state not in _NOT_STARTED_OR_DONE]
        for member in upstream + downstream:
            if member.id not in region:
                region[member.id] = member
                stack.append(member)
    return [subtask for subtask in graph.subtasks() if subtask.id in region]



def pipelined_region(graph: ExecutionGraph,
                     failed: Iterable[ExecutionVertex]) -> list[ExecutionVertex]:
    """``failed`` and every subtask connected to them by an exchange, whatever its state: a
    streaming exchange is pipelined, so a restarted consumer needs its producers to send
    again (from the checkpoint, finished ones too) and a restarted producer its consumers
    to read again. In topological order."""
    region = {subtask.id: subtask for subtask in failed}
    stack = list(region.values())
    while stack:
        subtask = stack.pop()
        for member in graph.producers_of(subtask) + graph.consumers_reading(subtask):
            if member.id not in region:
                region[member.id] = member
                stack.append(member)
    return [subtask for subtask in graph.subtasks() if subtask.id in region]
