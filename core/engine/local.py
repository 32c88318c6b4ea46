"""Run a whole job in this process, vertex by vertex, through ``run_subtask``.

The same data path as the cluster (splits, result partitions, sinks) without the
JobManager, the TaskManagers and MQTT: for tests, for the README's demo, and as the
reference of what a distributed run must produce. Subtasks run one after the other on
the calling thread; a source's splits are dealt round robin to its subtasks.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from clusterdeck.core.engine.exchange import InputPartition
from clusterdeck.core.engine.localexecution import DEFAULT_MAX_RECORDS
from clusterdeck.core.engine.runtime import DEFAULT_SPLIT_BATCH_BYTES, SubtaskResult, run_subtask
from clusterdeck.core.jobapi.inputsplits import DEFAULT_BLOCK_SIZE, plan_splits
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.jobapi.sinkfolders import initialize_sinks
from clusterdeck.core.protocol.jobgraph import JobEdge, JobKind, ShipStrategy
from clusterdeck.core.protocol.wiring import ResultPartitionRef


@dataclass(frozen=True)
class LocalJobResult:
    """Every subtask's result, and the job-level totals a client shows."""

    job_name: str
    kind: JobKind
    subtasks: tuple[SubtaskResult, ...]
    duration: float

    @property
    def counters(self) -> dict[str, int | float]:
        totals: dict[str, int | float] = {}
        for result in self.subtasks:
            for name, value in result.counters.items():
                totals[name] = totals.get(name, 0) + value
        return totals

    @property
    def collected(self) -> dict[str, list[Any]]:
        """Collect sink op id -> its rows, in subtask order."""
        rows: dict[str, list[Any]] = {}
        for result in self.subtasks:
            for op_id, part in result.collected.items():
                rows.setdefault(op_id, []).extend(part)
        return rows

    @property
    def sink_files(self) -> dict[str, list[str]]:
        files: dict[str, list[str]] = {}
        for result in self.subtasks:
            for op_id, paths in result.sink_files.items():
                files.setdefault(op_id, []).extend(paths)
        return files

    @property
    def stdout(self) -> str:
        return "".join(result.stdout for result in self.subtasks)

    @property
    def stderr(self) -> str:
        return "".join(result.stderr for result in self.subtasks)

    def rows(self, sink: str | None = None) -> list[Any]:
        """The rows of a collect sink, by op id (the only one when omitted)."""
        collected = self.collected
        if sink is None:
            if len(collected) != 1:
                raise KeyError(f"the job has {len(collected)} collect sinks; name one")
            return next(iter(collected.values()))
        return collected[sink]

    def records(self, vertex_id: str) -> tuple[int, int]:
        """(records in, records out) of a vertex, over its subtasks."""
        mine = [r for r in self.subtasks if r.vertex_id == vertex_id]
        return sum(r.records_in for r in mine), sum(r.records_out for r in mine)


def run_local(job: LoadedJob, spark: SparkSession, work_dir: str | os.PathLike[str], *,
              block_size: int = DEFAULT_BLOCK_SIZE,
              split_batch_bytes: int = DEFAULT_SPLIT_BATCH_BYTES,
              local_max_records: int = DEFAULT_MAX_RECORDS) -> LocalJobResult:
    """Run ``job`` to its end; raises SubtaskFailed at the first failing subtask.
    Result partitions go under ``work_dir``; ``local_max_records``: see localexecution.py."""
    started = time.monotonic()
    graph = job.graph
    if graph.kind is JobKind.STREAMING:
        raise ValueError(f"{graph.name} is a streaming job: it runs on a cluster, with "
                         "checkpoints (clusterdeck submit; docs/streaming.md)")
    run_id = uuid.uuid4().hex[:8]
    if graph.kind is JobKind.DATAFLOW:
        initialize_sinks(graph)
    done: dict[str, list[SubtaskResult]] = {}
    for vertex in graph.topological_order():
        splits = plan_splits(vertex, block_size) \
            if vertex.is_source and graph.kind is JobKind.DATAFLOW else []
        done[vertex.id] = []
        for index in range(vertex.parallelism):
            attempt_id = f"{run_id}-{vertex.id}-{index}"
            inputs = [_inputs(edge, index, done[edge.source])
                      for edge in graph.inputs_of(vertex.id)]
            done[vertex.id].append(run_subtask(
                spark, job, vertex.id, index, attempt_id, inputs,
                iter(splits[index::vertex.parallelism]), Path(work_dir) / attempt_id,
                split_batch_bytes=split_batch_bytes, local_max_records=local_max_records))
    subtasks = tuple(result for results in done.values() for result in results)
    return LocalJobResult(graph.name, graph.kind, subtasks, time.monotonic() - started)


def _inputs(edge: JobEdge, consumer: int,
            producers: Sequence[SubtaskResult]) -> list[InputPartition]:
    """The partitions consumer subtask ``consumer`` reads over ``edge`` (the
    ExecutionGraph's wiring, done by hand)."""
    if edge.ship_strategy is ShipStrategy.FORWARD:
        producers, partition = [producers[consumer]], 0
    elif edge.ship_strategy is ShipStrategy.BROADCAST:
        partition = 0
    else:
        partition = consumer
    return [InputPartition(p.path, edge.target, edge.input_index, ResultPartitionRef(
                result.attempt_id, result.vertex_id, result.subtask_index, p.partition))
            for result in producers for p in result.partitions
            if p.target_vertex_id == edge.target and p.input_index == edge.input_index
            and p.partition == partition]
