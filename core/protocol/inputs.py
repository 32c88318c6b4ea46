"""A task asks its JobMaster for input: the next split of a source, or a page of an edge's
partitions for an offloaded deployment."""

from __future__ import annotations

from dataclasses import dataclass

from clusterdeck.core.protocol.jobgraph import InputSplit
from clusterdeck.core.protocol.wiring import ResultPartitionRef
from clusterdeck.core.rpc import message


@message
@dataclass(frozen=True)
class RequestNextInputSplit:
    """A source task -> its JobMaster (ask, fenced). ``sequence`` counts the requests of
    one attempt: a request sent again after a lost answer gets the same split back, so a
    retry never loses a split."""

    job_id: str
    attempt_id: str
    host: str
    sequence: int = 0


@message
@dataclass(frozen=True)
class NextInputSplit:
    """None when the source's input is exhausted."""

    split: InputSplit | None


@message
@dataclass(frozen=True)
class RequestInputPartitions:
    """A task of an offloaded deployment -> its JobMaster (ask, fenced): the partitions
    of input edge ``input_index`` from ``offset`` on."""

    job_id: str
    attempt_id: str
    input_index: int
    offset: int = 0


@message
@dataclass(frozen=True)
class InputPartitions:
    """One page of an edge's partitions; ``total`` is how many the edge has in all."""

    partitions: tuple[ResultPartitionRef, ...]
    total: int
