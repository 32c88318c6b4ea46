"""Which result partitions a producer writes and which ones a consumer subtask reads.

In a blocking exchange every producer subtask writes its output as files, one file per
result partition, before any consumer starts. The ship strategy of the edge decides how
many partitions that is and which of them a consumer subtask reads:

=========== ============================ =========================================
strategy    partitions per producer      consumer subtask j reads
=========== ============================ =========================================
FORWARD     1                            producer j's partition 0
HASH        consumer parallelism         partition j of every producer
REBALANCE   consumer parallelism         partition j of every producer
BROADCAST   1                            partition 0 of every producer
=========== ============================ =========================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterdeck.core.protocol.jobgraph import JobEdge, ShipStrategy


@dataclass(frozen=True)
class ResultPartitionRef:
    """One partition written by one finished attempt; the attempt id names its files."""

    producer_attempt_id: str
    producer_vertex_id: str
    producer_subtask: int
    partition: int
    taskmanager_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"producer_attempt_id": self.producer_attempt_id,
                "producer_vertex_id": self.producer_vertex_id,
                "producer_subtask": self.producer_subtask, "partition": self.partition,
                "taskmanager_id": self.taskmanager_id}


@dataclass(frozen=True)
class EdgeInput:
    """What a consumer subtask reads over one input edge (``input_index`` orders a join)."""

    input_index: int
    source_vertex_id: str
    ship_strategy: ShipStrategy
    partitions: tuple[ResultPartitionRef, ...]


@dataclass(frozen=True)
class EdgeOutput:
    """What a producer subtask writes for one output edge: ``partitions`` files."""

    target_vertex_id: str
    ship_strategy: ShipStrategy
    partitions: int


def partitions_per_producer(strategy: ShipStrategy, consumer_parallelism: int) -> int:
    """How many result partitions each producer subtask writes for one edge."""
    if strategy in (ShipStrategy.HASH, ShipStrategy.REBALANCE):
        return consumer_parallelism
    return 1


def consumed_partitions(strategy: ShipStrategy, consumer_subtask: int,
                        producer_parallelism: int) -> list[tuple[int, int]]:
    """The (producer subtask, partition) pairs consumer subtask ``consumer_subtask`` reads."""
    if strategy is ShipStrategy.FORWARD:
        return [(consumer_subtask, 0)]
    if strategy is ShipStrategy.BROADCAST:
        return [(producer, 0) for producer in range(producer_parallelism)]
    return [(producer, consumer_subtask) for producer in range(producer_parallelism)]


def check_edge(edge: JobEdge, producer_parallelism: int, consumer_parallelism: int) -> None:
    """Refuse an edge that cannot be wired: FORWARD pairs subtasks one to one."""
    if edge.ship_strategy is ShipStrategy.FORWARD and producer_parallelism != consumer_parallelism:
        raise ValueError(
            f"FORWARD edge {edge.source} -> {edge.target} needs equal parallelism, got "
            f"{producer_parallelism} and {consumer_parallelism}")


@dataclass(frozen=True)
class DataEndpoint:
    """Where a TaskManager's data service is and what opens one job's files there.

    ``url``: ``http://host:port`` on loopback, ``https://...`` beyond; ``fingerprint``:
    the SHA-256 of its self-signed certificate, the only one a client accepts ("" for
    http); ``capability``: for the job's work dir only (core/dataservice/capability.py)."""

    taskmanager_id: str
    url: str
    fingerprint: str
    capability: str


@dataclass(frozen=True)
class StreamChannel:
    """Where a streaming consumer subtask reads one producer subtask's output: the
    producer TaskManager's channel server (``host``, ``port``; ``fingerprint`` of its TLS
    certificate, "" on loopback), the result partition (named by the producer's attempt
    id), this consumer's subpartition in it, and the capability that opens it
    (core/streaming/network, docs/streaming.md "The data plane"); ``taskmanager_id``
    names the producer's TaskManager in the consumer's failure when the channel breaks."""

    host: str
    port: int
    fingerprint: str
    partition_id: str
    subpartition: int
    capability: str
    taskmanager_id: str = ""
