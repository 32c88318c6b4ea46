"""The dataflow API a job file's ``build(env)`` uses: sources, operators, sinks.

Declaring a pipeline runs nothing: every call adds a Transformation to the environment,
which the builder later turns into a JobGraph. Each operator takes ``name=`` (shown in
the graph) and ``parallelism=`` (subtasks; the environment's default when omitted). An
unknown keyword argument raises a TypeError naming the operator, which the loader reports
at submit time with the user's line.

Called on whichever thread loads the job; nothing here touches Spark or the filesystem
(paths are only made absolute, relative to the working directory of the submitter).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from clusterdeck.core.jobapi import mqttparams, plan
from clusterdeck.core.jobapi.arguments import (
    JOIN_TYPES,
    SQL_NAME,
    PathLike,
    checked_operator,
    checked_parallelism,
    input_paths,
    is_seconds,
    key_fields,
    schema_text,
    sink_path,
    user_function,
    watched_folder,
)
from clusterdeck.core.jobapi.counters import Counter
from clusterdeck.core.jobapi.keyedstreams import KeyedStream, WindowedStream
from clusterdeck.core.jobapi.plan import InputRef, KeySpec, Transformation, UserCode
from clusterdeck.core.protocol.checkpoints import CheckpointingMode, CheckpointOptions
from clusterdeck.core.protocol.keygroups import DEFAULT_MAX_PARALLELISM, check_max_parallelism

# What a job file may name (KeyedStream and WindowedStream live in keyedstreams).
__all__ = ["DataStream", "DataStreamSink", "ExecutionEnvironment", "KeyedStream",
           "WindowedStream"]


class ExecutionEnvironment:
    """What ``build(env)`` receives: the job's name, its arguments and its pipeline."""

    def __init__(self, job_name: str = "job", args: Sequence[str] = ()) -> None:
        self.job_name = job_name
        self.args: list[str] = list(args)
        self._parallelism = 1
        self._max_parallelism = DEFAULT_MAX_PARALLELISM
        self._transformations: list[Transformation] = []
        self._counters: dict[str, Counter] = {}
        self.checkpointing: CheckpointOptions | None = None

    @property
    def parallelism(self) -> int:
        return self._parallelism

    @property
    def max_parallelism(self) -> int:
        return self._max_parallelism

    @property
    def transformations(self) -> tuple[Transformation, ...]:
        return tuple(self._transformations)

    @property
    def counter_names(self) -> tuple[str, ...]:
        return tuple(self._counters)

    def set_parallelism(self, parallelism: int) -> ExecutionEnvironment:
        """The default parallelism of every operator declared without ``parallelism=``."""
        self._parallelism = checked_parallelism("set_parallelism", parallelism)
        return self

    def set_max_parallelism(self, max_parallelism: int) -> ExecutionEnvironment:
        """The key groups a streaming job's keyed state is split into (Flink's max
        parallelism, 128 by default): the widest a keyed vertex may ever be rescaled to.
        Fixed for the job's life: a savepoint restores only into a job with the same."""
        self._max_parallelism = check_max_parallelism(max_parallelism)
        return self

    def set_job_name(self, name: str) -> ExecutionEnvironment:
        if not isinstance(name, str) or not name:
            raise TypeError(f"set_job_name(): expected a non-empty string, got {name!r}")
        self.job_name = name
        return self

    def enable_checkpointing(self, interval: float, mode: str = "exactly-once", *,
                             timeout: float = 600.0, tolerable_failures: int = 0,
                             min_pause: float = 0.0, retained: int = 1
                             ) -> ExecutionEnvironment:
        """A streaming job checkpoints every ``interval`` seconds (docs/streaming.md);
        ``mode``: ``exactly-once`` or ``at-least-once``; the rest as Flink's
        ``execution.checkpointing.*``."""
        try:
            self.checkpointing = CheckpointOptions(
                float(interval), CheckpointingMode(mode), float(timeout),
                int(tolerable_failures), float(min_pause), int(retained)).checked()
        except (TypeError, ValueError) as error:
            raise ValueError(f"enable_checkpointing(): {error}") from None
        if not self.checkpointing.enabled:
            raise ValueError("enable_checkpointing(): the interval must be positive")
        return self

    def counter(self, name: str) -> Counter:
        """A counter user functions may ``add`` to; its total is in the job's result."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"counter(): expected a non-empty name, got {name!r}")
        return self._counters.setdefault(name, Counter(name))

    @checked_operator("from_collection")
    def from_collection(self, items: Iterable[Any], *, name: str | None = None,
                        parallelism: int | None = None) -> DataStream:
        """The items as records, split into ``parallelism`` contiguous parts."""
        return self._source(plan.SOURCE_COLLECTION, name or "from_collection", parallelism,
                            {}, UserCode(items=list(items)))

    @checked_operator("from_range")
    def from_range(self, start: int, end: int | None = None, *, name: str | None = None,
                   parallelism: int | None = None) -> DataStream:
        """The ints ``start .. end-1`` (``from_range(n)`` is ``0 .. n-1``), like ``range``."""
        if end is None:
            start, end = 0, start
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
            raise TypeError(f"from_range(): expected ints, got {start!r}, {end!r}")
        return self._source(plan.SOURCE_RANGE, name or "from_range", parallelism,
                            {"start": start, "end": end})

    @checked_operator("rate_source")
    def rate_source(self, rate: float, count: int | None = None, *, name: str | None = None,
                    parallelism: int | None = None) -> DataStream:
        """A stream of ``(index, "key-<index mod 10>")`` records at ``rate`` records a
        second in all, ``count`` of them if given, else for ever: replayable, so a job
        reading it is a streaming job that restores to the record after its last
        checkpoint (docs/streaming.md)."""
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0 \
                or rate == float("inf"):
            raise ValueError(f"rate_source(): rate is records a second, > 0; got {rate!r}")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                  or count < 0):
            raise ValueError(f"rate_source(): count is a whole number >= 0, got {count!r}")
        return self._source(plan.SOURCE_RATE, name or "rate_source", parallelism,
                            {"rate": float(rate), "count": count})

    @checked_operator("folder_source")
    def folder_source(self, path: PathLike, pattern: str = "*", *,
                      monitor_interval: float = 1.0, stop_when_idle: float | None = None,
                      name: str | None = None, parallelism: int | None = None) -> DataStream:
        """The lines (``str``) of the text files that appear in the folder ``path`` with
        names matching ``pattern``, each file read once it is complete, for ever (Flink's
        ``FileSource.monitorContinuously``), or until ``stop_when_idle`` seconds passed
        with nothing new; replayable by file and offset, so a job reading it is a
        streaming job (docs/streaming.md). ``monitor_interval``: seconds between two
        listings of the folder."""
        if not isinstance(pattern, str) or not pattern or "/" in pattern:
            raise ValueError(f"folder_source(): pattern is a glob of file names ('*.txt'), "
                             f"got {pattern!r}")
        if not is_seconds(monitor_interval) or not monitor_interval > 0:
            raise ValueError(f"folder_source(): monitor_interval is seconds, > 0; "
                             f"got {monitor_interval!r}")
        if stop_when_idle is not None and not (is_seconds(stop_when_idle)
                                               and stop_when_idle >= 0):
            raise ValueError(f"folder_source(): stop_when_idle is seconds, >= 0, or None "
                             f"(for ever); got {stop_when_idle!r}")
        return self._source(plan.SOURCE_FOLDER, name or "folder_source", parallelism,
                            {"path": watched_folder(path), "pattern": pattern,
                             "monitor_interval": float(monitor_interval),
                             "stop_when_idle": None if stop_when_idle is None
                             else float(stop_when_idle)})

    @checked_operator("mqtt_source")
    def mqtt_source(self, topic: str, *, url: str | None = None, qos: int = 1,
                    format: str = "text", max_buffered: int = mqttparams.MAX_BUFFERED,
                    max_payload: int = mqttparams.MAX_PAYLOAD, name: str | None = None,
                    parallelism: int | None = None) -> DataStream:
        """The messages of an MQTT topic (a filter: ``+`` and ``#`` allowed), each payload
        a record: a ``str`` (``format="text"``, UTF-8) or what ``json.loads`` makes of it
        (``"json"``). From the cluster's own broker under its ``data/`` topics when ``url``
        is None (``"sensors/+"`` is ``clusterdeck/<cluster>/data/sensors/+``), else from
        ``mqtt[s]://[user:password@]host:port``. With QoS 1 a message is acknowledged
        only once a completed checkpoint covers it: at least once on a broker that keeps
        a persistent session's unacknowledged messages (Mosquitto; not amqtt). Several
        subtasks share one subscription (``$share``); runs until cancelled or stopped
        (docs/streaming.md)."""
        return self._source(plan.SOURCE_MQTT, name or "mqtt_source", parallelism,
                            mqttparams.source_params(topic, url, qos, format, max_buffered,
                                                     max_payload))

    @checked_operator("read_text")
    def read_text(self, path: PathLike | Sequence[PathLike], *, name: str | None = None,
                  parallelism: int | None = None) -> DataStream:
        """Lines of text files (a file, a folder or a glob); each line is a ``str``."""
        return self._source(plan.SOURCE_TEXT, name or "read_text", parallelism,
                            {"paths": input_paths("read_text", path)})

    @checked_operator("read_csv")
    def read_csv(self, path: PathLike | Sequence[PathLike], header: bool = True,
                 schema: Any = None, *, name: str | None = None,
                 parallelism: int | None = None) -> DataStream:
        """Rows of CSV files; columns are strings unless ``schema`` gives their types."""
        return self._source(plan.SOURCE_CSV, name or "read_csv", parallelism,
                            {"paths": input_paths("read_csv", path), "header": bool(header),
                             "schema": schema_text("read_csv", schema)})

    @checked_operator("read_parquet")
    def read_parquet(self, path: PathLike | Sequence[PathLike], *, name: str | None = None,
                     parallelism: int | None = None) -> DataStream:
        return self._source(plan.SOURCE_PARQUET, name or "read_parquet", parallelism,
                            {"paths": input_paths("read_parquet", path)})

    def _source(self, kind: str, name: str, parallelism: int | None, params: dict[str, Any],
                code: UserCode | None = None) -> DataStream:
        return DataStream(self, self._add(kind, name, (), parallelism, params, code))

    def _add(self, kind: str, name: str, inputs: tuple[InputRef, ...],
             parallelism: int | None, params: dict[str, Any],
             code: UserCode | None = None) -> Transformation:
        op_name = kind.split(".")[-1]
        if not isinstance(name, str) or not name:
            raise TypeError(f"{op_name}(): name must be a non-empty string, got {name!r}")
        if parallelism is not None:
            checked_parallelism(op_name, parallelism)
        for ref in inputs:
            if ref.source not in self._transformations:
                raise ValueError(f"{op_name}(): an input belongs to another environment")
        transformation = Transformation(
            seq=len(self._transformations) + 1, kind=kind, name=name, inputs=inputs,
            parallelism=parallelism, params=params, code=code or UserCode())
        self._transformations.append(transformation)
        return transformation


class DataStream:
    """A stream of records: the output of a source or an operator."""

    def __init__(self, env: ExecutionEnvironment, transformation: Transformation,
                 partitioning: str | None = None) -> None:
        self._env = env
        self._transformation = transformation
        self._partitioning = partitioning

    @property
    def id(self) -> str:
        return self._transformation.id

    @property
    def name(self) -> str:
        return self._transformation.name

    def _then(self, kind: str, name: str, parallelism: int | None,
              params: dict[str, Any] | None = None, code: UserCode | None = None,
              inputs: tuple[InputRef, ...] | None = None) -> Transformation:
        inputs = inputs or (InputRef(self._transformation, self._partitioning),)
        return self._env._add(kind, name, inputs, parallelism, params or {}, code)

    def _derive(self, kind: str, name: str, parallelism: int | None,
                params: dict[str, Any] | None = None, code: UserCode | None = None,
                inputs: tuple[InputRef, ...] | None = None) -> DataStream:
        """The stream out of the next operator (a keyed stream's, too)."""
        return DataStream(self._env, self._then(kind, name, parallelism, params, code, inputs))

    @checked_operator("map")
    def map(self, fn: Callable[[Any], Any], *, name: str | None = None,
            parallelism: int | None = None, schema: Any = None) -> DataStream:
        """One record out per record in. ``schema`` (optional) types the output's columns
        where they are needed (SQL, join, CSV/Parquet sinks) instead of inferring them."""
        t = self._then(plan.MAP, name or "map", parallelism,
                       {"schema": schema_text("map", schema)},
                       UserCode(fn=user_function("map", fn)))
        return DataStream(self._env, t)

    @checked_operator("flat_map")
    def flat_map(self, fn: Callable[[Any], Iterable[Any]], *, name: str | None = None,
                 parallelism: int | None = None, schema: Any = None) -> DataStream:
        """Zero or more records out per record in (``fn`` returns an iterable)."""
        t = self._then(plan.FLAT_MAP, name or "flat_map", parallelism,
                       {"schema": schema_text("flat_map", schema)},
                       UserCode(fn=user_function("flat_map", fn)))
        return DataStream(self._env, t)

    @checked_operator("filter")
    def filter(self, fn: Callable[[Any], bool], *, name: str | None = None,
               parallelism: int | None = None) -> DataStream:
        t = self._then(plan.FILTER, name or "filter", parallelism, {},
                       UserCode(fn=user_function("filter", fn)))
        return DataStream(self._env, t)

    @checked_operator("map_batches")
    def map_batches(self, fn: Callable[[Any], Any], *, format: str = "records",
                    name: str | None = None, parallelism: int | None = None,
                    schema: Any = None) -> DataStream:
        """A whole batch of records at a time (Spark's ``mapPartitions``/``mapInArrow``):
        a streaming job's micro-batch, a batch job's partition. ``format="records"``:
        ``fn(records: list)`` returns an iterable of records; ``format="arrow"``:
        ``fn(table: pyarrow.Table)`` gets the batch's columns (``_1.._n`` for tuples,
        ``value`` for scalars) and returns a Table or RecordBatch whose rows become tuples
        (scalars with one column). ``fn`` is not called for an empty batch. In a streaming
        job every record out carries the largest timestamp of the batch in
        (docs/job-api.md)."""
        if format not in plan.BATCH_FORMATS:
            raise ValueError(f"map_batches(): format is one of "
                             f"{', '.join(map(repr, plan.BATCH_FORMATS))}; got {format!r}")
        t = self._then(plan.MAP_BATCHES, name or "map_batches", parallelism,
                       {"format": format, "schema": schema_text("map_batches", schema)},
                       UserCode(fn=user_function("map_batches", fn)))
        return DataStream(self._env, t)

    @checked_operator("assign_timestamps")
    def assign_timestamps(self, fn: Callable[[Any], float] | None = None,
                          max_out_of_orderness: float = 0.0, *, field: str | int | None = None,
                          name: str | None = None,
                          parallelism: int | None = None) -> DataStream:
        """Event time, streaming jobs only: ``fn(record)`` is the record's time in seconds,
        or ``field`` names the field that holds it (a position or a name, as ``key_by``'s;
        declarative, so a batch of columns gets its timestamps without a Python call per
        record), and the stream carries a watermark trailing the largest time seen by
        ``max_out_of_orderness`` seconds (Flink's ``forBoundedOutOfOrderness``): records
        may come that much out of order before a window they belong to fires without
        them (docs/streaming.md)."""
        if not is_seconds(max_out_of_orderness) or max_out_of_orderness < 0:
            raise ValueError(f"assign_timestamps(): max_out_of_orderness is seconds, >= 0; "
                             f"got {max_out_of_orderness!r}")
        if (fn is None) == (field is None):
            raise TypeError("assign_timestamps(): give either a function or field=, "
                            "not both nor neither")
        params: dict[str, Any] = {"max_out_of_orderness": float(max_out_of_orderness)}
        if field is not None:
            if isinstance(field, bool) or not isinstance(field, str | int):
                raise TypeError(f"assign_timestamps(): field is a position or a name, "
                                f"got {field!r}")
            params["field"] = field
        code = UserCode(fn=user_function("assign_timestamps", fn)) if fn is not None \
            else UserCode()
        t = self._then(plan.ASSIGN_TIMESTAMPS, name or "assign_timestamps", parallelism,
                       params, code)
        return DataStream(self._env, t)

    @checked_operator("key_by")
    def key_by(self, key: str | int | Sequence[str | int] | Callable[[Any], Any]) -> KeyedStream:
        """Group by a key for the next operator: a field name (``"word"``, ``"_1"``), a
        position (``0``), a list of them, or a function of the record."""
        try:
            spec, fn = KeySpec.of(key)
        except TypeError as exc:
            raise TypeError(f"key_by(): {exc}") from None
        return KeyedStream(self, spec, fn)

    @checked_operator("join")
    def join(self, other: DataStream, on: Any = None, *, left_on: Any = None,
             right_on: Any = None, how: str = "inner", name: str | None = None,
             parallelism: int | None = None) -> DataStream:
        """Join with ``other`` by key fields; output records are Rows of both sides'
        columns (a right-side column whose name clashes gets the suffix ``_right``).
        ``how``: inner, left, right, full, left_semi, left_anti. A ``broadcast()`` side is
        shipped whole to every subtask instead of being hashed."""
        if not isinstance(other, DataStream):
            raise TypeError(f"join(): expected a DataStream to join with, got {other!r}")
        if on is not None and (left_on is not None or right_on is not None):
            raise TypeError("join(): give on= or left_on= and right_on=, not both")
        if on is None and (left_on is None or right_on is None):
            raise TypeError("join(): needs on= or both left_on= and right_on=")
        left_fields = key_fields("join", on if on is not None else left_on)
        right_fields = key_fields("join", on if on is not None else right_on)
        if len(left_fields) != len(right_fields):
            raise TypeError("join(): left_on and right_on need as many fields each")
        if how not in JOIN_TYPES:
            raise ValueError(f"join(): unknown how={how!r}; one of {', '.join(JOIN_TYPES)}")
        how = JOIN_TYPES[how]
        left_broadcast = self._partitioning == plan.BROADCAST
        right_broadcast = other._partitioning == plan.BROADCAST
        if left_broadcast and right_broadcast:
            raise ValueError("join(): at most one side can be broadcast")
        if right_broadcast and how not in ("inner", "left", "left_semi", "left_anti"):
            raise ValueError(f"join(): a broadcast right side cannot be joined how={how!r}")
        if left_broadcast and how not in ("inner", "right"):
            raise ValueError(f"join(): a broadcast left side cannot be joined how={how!r}")
        hashed = not (left_broadcast or right_broadcast)
        inputs = (InputRef(self._transformation,
                           plan.HASH if hashed else self._partitioning),
                  InputRef(other._transformation,
                           plan.HASH if hashed else other._partitioning))
        t = self._then(plan.JOIN, name or "join", parallelism,
                       {"left_on": left_fields, "right_on": right_fields, "how": how,
                        "same_keys": on is not None}, inputs=inputs)
        return DataStream(self._env, t)

    @checked_operator("sql")
    def sql(self, query: str, *, table: str = "input",
            tables: Mapping[str, DataStream] | None = None, partition_by: Any = None,
            name: str | None = None, parallelism: int | None = None) -> DataStream:
        """A Spark SQL statement over this stream (the view ``table``) and ``tables``.

        It runs in one subtask by default, seeing all its inputs. With ``partition_by``
        (the columns it groups or joins by) inputs are hashed on them and it may run in
        parallel; with ``parallelism`` alone it must be row by row (SELECT ... WHERE).
        """
        if not isinstance(query, str) or not query.strip():
            raise TypeError(f"sql(): expected a SQL statement, got {query!r}")
        others = dict(tables or {})
        names = [table, *others]
        for view in names:
            if not isinstance(view, str) or not SQL_NAME.fullmatch(view):
                raise ValueError(f"sql(): {view!r} is not a usable table name")
        if len(set(names)) != len(names):
            raise ValueError(f"sql(): table names must differ, got {names}")
        streams = [self, *others.values()]
        if not all(isinstance(stream, DataStream) for stream in streams):
            raise TypeError("sql(): tables maps names to DataStreams")
        keys = key_fields("sql", partition_by) if partition_by is not None else []
        inputs = tuple(
            InputRef(stream._transformation,
                     stream._partitioning if stream._partitioning == plan.BROADCAST or not keys
                     else plan.HASH)
            for stream in streams)
        t = self._then(plan.SQL, name or "sql", parallelism,
                       {"query": query, "tables": names, "partition_by": keys}, inputs=inputs)
        return DataStream(self._env, t)

    def rebalance(self) -> DataStream:
        """Ship this stream round robin to the next operator's subtasks."""
        return DataStream(self._env, self._transformation, plan.REBALANCE)

    def broadcast(self) -> DataStream:
        """Ship all of this stream to every subtask of the next operator."""
        return DataStream(self._env, self._transformation, plan.BROADCAST)

    def slot_sharing_group(self, group: str) -> DataStream:
        """Put this operator in a slot sharing group (operators in different groups are
        never chained together and never share a slot)."""
        if not isinstance(group, str) or not group:
            raise TypeError(f"slot_sharing_group(): expected a name, got {group!r}")
        self._transformation.slot_sharing_group = group
        return self

    @checked_operator("write_text")
    def write_text(self, path: PathLike, *, name: str | None = None,
                   parallelism: int | None = None) -> DataStreamSink:
        """One line per record (``str(record)``; strings as they are) into files
        ``part-*.txt`` of the folder ``path``."""
        return self._sink(plan.SINK_TEXT, name or "write_text", parallelism,
                          {"path": sink_path("write_text", path)})

    @checked_operator("write_csv")
    def write_csv(self, path: PathLike, header: bool = True, *, name: str | None = None,
                  parallelism: int | None = None) -> DataStreamSink:
        return self._sink(plan.SINK_CSV, name or "write_csv", parallelism,
                          {"path": sink_path("write_csv", path), "header": bool(header)})

    @checked_operator("write_parquet")
    def write_parquet(self, path: PathLike, *, name: str | None = None,
                      parallelism: int | None = None) -> DataStreamSink:
        return self._sink(plan.SINK_PARQUET, name or "write_parquet", parallelism,
                          {"path": sink_path("write_parquet", path)})

    @checked_operator("print")
    def print(self, *, name: str | None = None,
              parallelism: int | None = None) -> DataStreamSink:
        """Each record as a line of the task's printed output (``str(record)``, prefixed
        ``<subtask>> `` with several subtasks, as Flink's ``print()``), shown by
        ``clusterdeck submit`` as it comes; at least once (docs/streaming.md). Streaming
        jobs only: a batch job collects."""
        return self._sink(plan.SINK_PRINT, name or "print", parallelism, {})

    @checked_operator("write_mqtt")
    def write_mqtt(self, topic: str, *, url: str | None = None, qos: int = 1,
                   retain: bool = False, max_inflight: int = mqttparams.MAX_INFLIGHT,
                   name: str | None = None, parallelism: int | None = None) -> DataStreamSink:
        """Each record as one message on ``topic`` (the line ``write_text`` would write,
        UTF-8; ``map(json.dumps)`` first for JSON), on the cluster's broker under its
        ``data/`` topics when ``url`` is None, else on ``mqtt[s]://...``. With QoS 1 every
        message is acknowledged by the broker before a checkpoint completes: at least
        once, repeated after a failover. At most ``max_inflight`` messages await their
        acknowledgement (docs/streaming.md). Streaming jobs only."""
        return self._sink(plan.SINK_MQTT, name or "write_mqtt", parallelism,
                          mqttparams.sink_params(topic, url, qos, retain, max_inflight))

    @checked_operator("collect")
    def collect(self, *, name: str | None = None,
                parallelism: int | None = None) -> DataStreamSink:
        """Send every record back to the client, as JSON (see the record model)."""
        return self._sink(plan.SINK_COLLECT, name or "collect", parallelism, {})

    def _sink(self, kind: str, name: str, parallelism: int | None,
              params: dict[str, Any]) -> DataStreamSink:
        return DataStreamSink(self._then(kind, name, parallelism, params))


class DataStreamSink:
    """The end of a pipeline; ``id`` finds a collect sink's rows in the job's result."""

    def __init__(self, transformation: Transformation) -> None:
        self._transformation = transformation

    @property
    def id(self) -> str:
        return self._transformation.id

    @property
    def name(self) -> str:
        return self._transformation.name
