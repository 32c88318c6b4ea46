"""The JobGraph: what a job file declares, as plain data.

A JobGraph crosses the wire (client -> Dispatcher -> JobMaster) and is kept in the job
store, so it holds data only: no functions, no pickles. The user's functions are found
again on the TaskManager by loading the job's artifact and building it once more; an
operator is matched by its ``id``, which the builder assigns in declaration order.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from clusterdeck.core.protocol.checkpoints import CheckpointOptions, SavepointRestore
from clusterdeck.core.protocol.keygroups import DEFAULT_MAX_PARALLELISM


class ShipStrategy(StrEnum):
    """How a producer's records reach the consumer subtasks (Flink's ship strategies)."""

    FORWARD = "FORWARD"      # producer subtask i -> consumer subtask i
    HASH = "HASH"            # by key: one result partition per consumer subtask
    REBALANCE = "REBALANCE"  # round robin over the consumer subtasks
    BROADCAST = "BROADCAST"  # every record to every consumer subtask


class JobKind(StrEnum):
    DATAFLOW = "dataflow"              # a file with build(env)
    STREAMING = "streaming"            # a file with build(env) reading an unbounded source
    PYSPARK_SCRIPT = "pyspark-script"  # an ordinary PySpark program, one vertex, one slot


@dataclass(frozen=True)
class OperatorSpec:
    """One operator of a chain. ``kind`` is e.g. ``source.text``, ``map``, ``reduce``,
    ``sink.parquet``; ``params`` holds JSON-able arguments (paths, key fields, SQL text)."""

    id: str
    kind: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobVertex:
    """A chain of operators run together in one task, ``parallelism`` subtasks wide."""

    id: str
    name: str
    parallelism: int
    operators: tuple[OperatorSpec, ...]
    slot_sharing_group: str = "default"

    @property
    def is_source(self) -> bool:
        return self.operators[0].kind.startswith("source.")

    @property
    def is_sink(self) -> bool:
        return self.operators[-1].kind.startswith("sink.")


@dataclass(frozen=True)
class JobEdge:
    """A blocking data exchange between two vertices; ``input_index`` orders a consumer's
    inputs (0 = left, 1 = right of a join)."""

    source: str
    target: str
    ship_strategy: ShipStrategy
    input_index: int = 0


@dataclass(frozen=True)
class JobGraph:
    name: str
    kind: JobKind
    vertices: tuple[JobVertex, ...]
    edges: tuple[JobEdge, ...] = ()
    default_parallelism: int = 1
    checkpointing: CheckpointOptions | None = None  # a streaming job's
    savepoint: SavepointRestore | None = None  # a streaming job started from a savepoint
    max_parallelism: int = DEFAULT_MAX_PARALLELISM  # key groups of its keyed state (keygroups.py)

    def vertex(self, vertex_id: str) -> JobVertex:
        for vertex in self.vertices:
            if vertex.id == vertex_id:
                return vertex
        raise KeyError(vertex_id)

    def inputs_of(self, vertex_id: str) -> list[JobEdge]:
        return sorted((e for e in self.edges if e.target == vertex_id),
                      key=lambda e: e.input_index)

    def outputs_of(self, vertex_id: str) -> list[JobEdge]:
        return [e for e in self.edges if e.source == vertex_id]

    def topological_order(self) -> list[JobVertex]:
        """Vertices with every producer before its consumers; raises on a cycle."""
        remaining = {v.id: len(self.inputs_of(v.id)) for v in self.vertices}
        ready = [v.id for v in self.vertices if remaining[v.id] == 0]
        order: list[JobVertex] = []
        while ready:
            vertex_id = ready.pop(0)
            order.append(self.vertex(vertex_id))
            for edge in self.outputs_of(vertex_id):
                remaining[edge.target] -= 1
                if remaining[edge.target] == 0:
                    ready.append(edge.target)
        if len(order) != len(self.vertices):
            raise ValueError(f"job graph {self.name!r} has a cycle")
        return order

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> JobGraph:
        vertices = tuple(
            JobVertex(
                id=v["id"], name=v["name"], parallelism=int(v["parallelism"]),
                operators=tuple(OperatorSpec(**op) for op in v["operators"]),
                slot_sharing_group=v.get("slot_sharing_group", "default"),
            )
            for v in data["vertices"]
        )
        edges = tuple(
            JobEdge(e["source"], e["target"], ShipStrategy(e["ship_strategy"]),
                    int(e.get("input_index", 0)))
            for e in data.get("edges", ())
        )
        checkpointing = data.get("checkpointing")
        return JobGraph(name=data["name"], kind=JobKind(data["kind"]), vertices=vertices,
                        edges=edges, default_parallelism=int(data.get("default_parallelism", 1)),
                        checkpointing=CheckpointOptions(**checkpointing) if checkpointing
                        else None,
                        max_parallelism=int(data.get("max_parallelism",
                                                     DEFAULT_MAX_PARALLELISM)))


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: str) -> bool:
    """A path Spark reads the same from every machine (``s3a://``, ``hdfs://``,
    ``file://`` on a shared mount): passed to Spark untouched, read by any TaskManager."""
    return _URL.match(path) is not None


@dataclass(frozen=True)
class InputSplit:
    """A piece of a source vertex's input, handed out by the JobMaster one at a time.

    File sources: ``path`` with a byte range (``start``, ``length``; length -1 = whole
    file), cut at line boundaries by the reader. Generated sources (collection, range):
    ``part`` of ``parts``.
    """

    split_id: int
    vertex_id: str
    path: str = ""
    start: int = 0
    length: int = -1
    part: int = 0
    parts: int = 1
    hosts: tuple[str, ...] = ()
