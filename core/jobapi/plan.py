"""The declared pipeline, before it becomes a JobGraph: one Transformation per operator.

``build(env)`` fills the environment with Transformations (Flink's name for a declared,
not yet executed operator). They hold what the JobGraph may not: the user's functions and
a collection's items (``UserCode``). The builder turns them into the data-only JobGraph
and an operator-id -> UserCode map; both are rebuilt from the job file wherever the job
runs, and matched by operator id.

Runs on whichever thread loads the job (the client's, the Dispatcher's, a TaskManager
slot's); nothing here touches Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Operator kinds, as they appear in OperatorSpec.kind.
SOURCE_TEXT = "source.text"
SOURCE_CSV = "source.csv"
SOURCE_PARQUET = "source.parquet"
SOURCE_COLLECTION = "source.collection"
SOURCE_RANGE = "source.range"
SOURCE_RATE = "source.rate"  # unbounded (or counted) and replayable: a streaming job's
SOURCE_FOLDER = "source.folder"  # a watched folder's new files, replayable by file and offset
SOURCE_MQTT = "source.mqtt"  # an MQTT topic's messages: not replayable, acked per checkpoint
MAP = "map"
FLAT_MAP = "flat_map"
FILTER = "filter"
MAP_BATCHES = "map_batches"  # a user function over a whole batch of records (mapPartitions)
ASSIGN_TIMESTAMPS = "assign_timestamps"  # event time and a watermark (streaming jobs)
REDUCE = "reduce"
SUM = "sum"
COUNT = "count"
AGGREGATE = "aggregate"
WINDOW = "window"  # a keyed event-time window's count/sum/reduce/aggregate (streaming jobs)
PROCESS = "process"  # a user function over each key's records with that key's value state
JOIN = "join"
SQL = "sql"
SINK_TEXT = "sink.text"
SINK_CSV = "sink.csv"
SINK_PARQUET = "sink.parquet"
SINK_COLLECT = "sink.collect"
SINK_PRINT = "sink.print"  # a streaming task's printed output, at least once
SINK_MQTT = "sink.mqtt"  # a message per record on an MQTT topic, at least once
PYSPARK_SCRIPT = "pyspark.script"

FILE_SOURCES = frozenset({SOURCE_TEXT, SOURCE_CSV, SOURCE_PARQUET})
STREAMING_SOURCES = frozenset({SOURCE_RATE, SOURCE_FOLDER, SOURCE_MQTT})
STREAMING_OPERATORS = frozenset({MAP, FLAT_MAP, FILTER, MAP_BATCHES, ASSIGN_TIMESTAMPS})
STATELESS = frozenset({MAP, FLAT_MAP, FILTER, MAP_BATCHES})
STREAMING_KEYED = frozenset({WINDOW, REDUCE, SUM, COUNT, PROCESS})  # windows, running
# aggregates, value state
STREAMING_ONLY = frozenset({ASSIGN_TIMESTAMPS, WINDOW})
WINDOW_FUNCTIONS = ("count", "sum", "min", "max", "mean", "reduce", "aggregate")
STREAMING_SINKS = frozenset({SINK_TEXT, SINK_PRINT, SINK_MQTT})
KEYED = frozenset({REDUCE, SUM, COUNT, AGGREGATE, WINDOW, PROCESS})
FILE_SINKS = frozenset({SINK_TEXT, SINK_CSV, SINK_PARQUET})
BATCH_FORMATS = ("records", "arrow")  # what a map_batches function is given: a list of
# records, or a pyarrow Table of their columns

# How a Transformation's input is partitioned (None: FORWARD or REBALANCE, by parallelism).
HASH = "hash"
REBALANCE = "rebalance"
BROADCAST = "broadcast"


@dataclass(frozen=True)
class KeySpec:
    """A key: field names or positions (``fields``), or a user function (``by_function``;
    the function itself is in UserCode.keys)."""

    fields: tuple[str | int, ...] = ()
    by_function: bool = False

    @staticmethod
    def of(key: Any) -> tuple[KeySpec, Callable[[Any], Any] | None]:
        """The spec for what a user passed to ``key_by``/``on``, and its function if any."""
        if callable(key) and not isinstance(key, str):
            return KeySpec(by_function=True), key
        items = list(key) if isinstance(key, list | tuple) else [key]
        if not items or not all(isinstance(item, str | int) and not isinstance(item, bool)
                                for item in items):
            raise TypeError(f"a key is a field name, a position, a list of them or a function; "
                            f"got {key!r}")
        return KeySpec(fields=tuple(items)), None

    def to_params(self) -> dict[str, Any]:
        return {"function": True} if self.by_function else {"fields": list(self.fields)}

    @staticmethod
    def from_params(params: dict[str, Any]) -> KeySpec:
        if params.get("function"):
            return KeySpec(by_function=True)
        return KeySpec(fields=tuple(params["fields"]))


@dataclass(frozen=True)
class AggregateFunctions:
    """A window's ``aggregate(create, add, merge, result)`` (Flink's AggregateFunction):
    ``create()`` a fresh accumulator, ``add(accumulator, record)`` one record folded in,
    ``merge(a, b)`` two accumulators of the same key and window, ``result(accumulator)``
    what the window emits (None: the accumulator itself)."""

    create: Callable[[], Any]
    add: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any]
    result: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class UserCode:
    """What an operator needs that cannot travel in the JobGraph.

    ``fn``: the map/flat_map/filter/map_batches/reduce/process/assign_timestamps function;
    ``keys``: a key function per input (None where the key is given by fields);
    ``items``: a collection source's items; ``aggregate``: a window's aggregate functions.
    """

    fn: Callable[..., Any] | None = None
    keys: tuple[Callable[[Any], Any] | None, ...] = ()
    items: Sequence[Any] | None = None
    aggregate: AggregateFunctions | None = None


@dataclass(frozen=True)
class InputRef:
    """One input of a Transformation: the producing Transformation and how it is shipped
    (``partitioning`` None means FORWARD when the parallelisms match, else REBALANCE)."""

    source: Transformation
    partitioning: str | None = None


@dataclass(eq=False)
class Transformation:
    """One declared operator. ``seq`` is its place in declaration order; its operator id is
    derived from it, so building the same file twice gives the same ids."""

    seq: int
    kind: str
    name: str
    inputs: tuple[InputRef, ...] = ()
    parallelism: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    code: UserCode = field(default_factory=UserCode)
    slot_sharing_group: str | None = None

    @property
    def id(self) -> str:
        return operator_id(self.seq)

    @property
    def is_source(self) -> bool:
        return self.kind.startswith("source.")

    @property
    def is_sink(self) -> bool:
        return self.kind.startswith("sink.")


def operator_id(seq: int) -> str:
    return f"op-{seq}"


def vertex_id(head_seq: int) -> str:
    """A vertex is named after the first operator of its chain."""
    return f"vertex-{head_seq}"
