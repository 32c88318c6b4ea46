"""A streaming task's source and sink behind two small protocols, so the task
(streamtask.py) runs any chain ``source -> map/flat_map/filter -> sink`` the job API
accepts without knowing which source or sink it has.

A source is polled for records and keeps a position; a sink writes lines and keeps what a
checkpoint needs to commit them. Both give their checkpoint state as plain JSON data
(``snapshot``) and take it back (``restore``; None: a fresh start). The parts themselves
live in core/streaming (positions, files, no Spark); this module maps operator kinds to
them. Everything here runs on the task's slot thread.

The MQTT source and sink (mqttsource.py, mqttsink.py) hold a connection of their own
(core/rpc/mqttdata.py): to the cluster's broker with the TaskManager's login, under the
cluster's ``data/`` topics, unless the job names a broker of its own (``url``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

from clusterdeck.core.engine.columnbatches import rate_batch
from clusterdeck.core.engine.mqttparts import ClusterBroker, MqttMessages, MqttPublished
from clusterdeck.core.jobapi import plan
from clusterdeck.core.protocol.jobgraph import OperatorSpec
from clusterdeck.core.rpc import from_data, to_data
from clusterdeck.core.streaming.filesink import SinkState, TwoPhaseFileSink
from clusterdeck.core.streaming.foldersource import FolderPosition, FolderSource
from clusterdeck.core.streaming.printsink import PrintSink
from clusterdeck.core.streaming.ratesource import RatePosition, RateSource, rate_record

SOURCES = frozenset({plan.SOURCE_RATE, plan.SOURCE_FOLDER, plan.SOURCE_MQTT})
SINKS = frozenset({plan.SINK_TEXT, plan.SINK_PRINT, plan.SINK_MQTT})
FILES_LISTED = 50
"""Output files a subtask's result names at most: one is committed per checkpoint, so a
long job has thousands, which would not fit its final update (the folder has them all)."""


class StreamSource(Protocol):
    """A replayable source: what it emits after ``restore(snapshot(n))`` is exactly what
    it would have emitted next. (The MQTT source is not replayable: its broker keeps what
    it has not acknowledged, and it acknowledges when told a checkpoint ``committed``.)"""

    @property
    def exhausted(self) -> bool: ...

    def poll(self, now: float, limit: int) -> list[Any]:
        """The records due by ``now``, at most ``limit``."""
        ...

    def seconds_to_next(self, now: float) -> float: ...

    def snapshot(self, checkpoint_id: int) -> Any:
        """Its position for checkpoint ``checkpoint_id``, as JSON data."""
        ...

    def committed(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed."""
        ...

    def restore(self, state: Any) -> None: ...

    def close(self) -> None:
        """The task ends, fails or is cancelled: let go of what it holds."""
        ...


@runtime_checkable
class ColumnarSource(Protocol):
    """A source that can also give its records as a column batch (columnbatches.py),
    for a chain that takes columns."""

    def poll_columns(self, now: float, limit: int) -> pa.RecordBatch: ...


@dataclass(frozen=True)
class SinkOutput:
    """What a sink names in its subtask's result: committed files, or the file of what
    it printed and its end."""

    files: tuple[str, ...] = ()
    stdout_file: str = ""
    stdout_tail: str = ""


class StreamSink(Protocol):
    def write(self, lines: Iterable[str]) -> None: ...

    def snapshot(self, checkpoint_id: int) -> Any:
        """Phase one for ``checkpoint_id``: its state as JSON data."""
        ...

    def committed(self, checkpoint_id: int) -> None: ...

    def restore(self, state: Any) -> None: ...

    def close(self) -> None: ...

    def output(self) -> SinkOutput: ...


@dataclass(frozen=True)
class Printed:
    """Where a print sink's lines go: the attempt's output file, and the live feed."""

    path: Path
    feed: Callable[[str], None] | None = None


def open_source(op: OperatorSpec, subtask: int, parallelism: int,
                broker: ClusterBroker | None = None, owner: str = "") -> StreamSource:
    """A fresh source of kind ``op.kind``, before ``restore``. ``broker``: the cluster's,
    for an MQTT source without a ``url``; ``owner``: ``<job id>.<vertex id>``, which names
    an MQTT source's session (the same for every attempt)."""
    if op.kind == plan.SOURCE_RATE:
        return _RateRecords(op.params, subtask, parallelism)
    if op.kind == plan.SOURCE_FOLDER:
        return _FolderLines(op.params, subtask, parallelism)
    if op.kind == plan.SOURCE_MQTT:
        return MqttMessages(op.params, subtask, parallelism, broker, owner)
    raise ValueError(f"{op.kind} is not a streaming source")


def open_sink(op: OperatorSpec, subtask: int, parallelism: int, attempt: str,
              printed: Printed | None, broker: ClusterBroker | None = None) -> StreamSink:
    """A sink of kind ``op.kind``, before ``restore``. ``attempt``: the attempt's short
    name (file names of the file sink); ``printed``: for a print sink; ``broker``: the
    cluster's, for an MQTT sink without a ``url``."""
    if op.kind == plan.SINK_MQTT:
        return _PublishedLines(op.params, broker)
    if op.kind == plan.SINK_TEXT:
        return _CommittingFiles(Path(op.params["path"]), subtask, attempt)
    if op.kind == plan.SINK_PRINT:
        if printed is None:
            raise ValueError("a print sink needs the attempt's output file")
        return _PrintedLines(PrintSink(printed.path, subtask, parallelism, printed.feed))
    raise ValueError(f"{op.kind} is not a streaming sink")


class _RateRecords:
    """The rate generator's records; its state is the next index."""

    def __init__(self, params: dict[str, Any], subtask: int, parallelism: int) -> None:
        self._args = (params["rate"], subtask, parallelism, params["count"])
        self._source = RateSource(*self._args)

    @property
    def exhausted(self) -> bool:
        return self._source.exhausted

    def poll(self, now: float, limit: int) -> list[Any]:
        return [rate_record(index) for index in self._source.poll(now, limit)]

    def poll_columns(self, now: float, limit: int) -> pa.RecordBatch:
        return rate_batch(self._source.poll_range(now, limit))

    def seconds_to_next(self, now: float) -> float:
        return self._source.seconds_to_next(now)

    def snapshot(self, checkpoint_id: int) -> Any:
        position = self._source.position()
        if not position.backlog:
            return position.next_index
        return {"next": position.next_index, "backlog": list(position.backlog)}

    def committed(self, checkpoint_id: int) -> None:
        """Replayable: nothing waits for a checkpoint."""

    def restore(self, state: Any) -> None:
        self._source = RateSource(*self._args, rate_position(state))

    def close(self) -> None:
        """Holds nothing."""


def rate_position(state: Any) -> RatePosition | None:
    """A rate source's position from its checkpointed state: the next index, or with a
    backlog after a rescale ``{"next": n, "backlog": [...]}``."""
    if state is None:
        return None
    if isinstance(state, dict):
        return RatePosition(int(state["next"]), tuple(int(i) for i in state["backlog"]))
    return RatePosition(int(state))


class _FolderLines:
    """The watched folder's lines; its state is a FolderPosition."""

    def __init__(self, params: dict[str, Any], subtask: int, parallelism: int) -> None:
        self._params, self._subtask, self._parallelism = params, subtask, parallelism
        self._source = self._open(None)

    def _open(self, position: FolderPosition | None) -> FolderSource:
        params = self._params
        return FolderSource(Path(params["path"]), self._subtask, self._parallelism,
                            params["pattern"], params["monitor_interval"],
                            params["stop_when_idle"], position)

    @property
    def exhausted(self) -> bool:
        return self._source.exhausted

    def poll(self, now: float, limit: int) -> list[Any]:
        return list(self._source.poll(now, limit))

    def seconds_to_next(self, now: float) -> float:
        return self._source.seconds_to_next(now)

    def snapshot(self, checkpoint_id: int) -> Any:
        return to_data(self._source.position())

    def committed(self, checkpoint_id: int) -> None:
        """Replayable: nothing waits for a checkpoint."""

    def restore(self, state: Any) -> None:
        if state is not None:
            self._source = self._open(from_data(state, FolderPosition, "folder position"))

    def close(self) -> None:
        """Opens its files only while it reads them."""


class _CommittingFiles:
    """The two-phase file sink: exactly once with the checkpoints."""

    def __init__(self, folder: Path, subtask: int, attempt: str) -> None:
        self._sink = TwoPhaseFileSink(folder, subtask, attempt)

    def write(self, lines: Iterable[str]) -> None:
        self._sink.write(lines)

    def snapshot(self, checkpoint_id: int) -> Any:
        return to_data(self._sink.snapshot(checkpoint_id))

    def committed(self, checkpoint_id: int) -> None:
        self._sink.committed(checkpoint_id)

    def restore(self, state: Any) -> None:
        """From a checkpoint's state, or afresh: either way what an earlier attempt left
        uncommitted is dropped."""
        sink = self._sink
        sink_state = (from_data(state, SinkState, "sink state") if state is not None
                      else SinkState(sink.subtask, 0, ()))
        self._sink = TwoPhaseFileSink.restore(sink.folder, sink_state, sink.attempt)

    def close(self) -> None:
        self._sink.close()

    def output(self) -> SinkOutput:
        """The first ``FILES_LISTED`` of this subtask's committed files, in their order."""
        prefix = f"part-{self._sink.subtask}-"
        folder = self._sink.folder
        numbered = sorted((int(path.name[len(prefix):]), str(path))
                          for path in folder.iterdir()
                          if path.name.startswith(prefix) and path.name[len(prefix):].isdigit())
        return SinkOutput(files=tuple(path for _, path in numbered[:FILES_LISTED]))


class _PrintedLines:
    """The print sink: at least once, no state."""

    def __init__(self, sink: PrintSink) -> None:
        self._sink = sink

    def write(self, lines: Iterable[str]) -> None:
        self._sink.write(lines)

    def snapshot(self, checkpoint_id: int) -> Any:
        return self._sink.snapshot(checkpoint_id)

    def committed(self, checkpoint_id: int) -> None:
        self._sink.committed(checkpoint_id)

    def restore(self, state: Any) -> None:
        """Nothing to restore: what an earlier attempt printed stays printed."""

    def close(self) -> None:
        self._sink.close()

    def output(self) -> SinkOutput:
        printed = self._sink.printed > 0
        return SinkOutput(stdout_file=str(self._sink.path) if printed else "",
                          stdout_tail=self._sink.tail)


class _PublishedLines(MqttPublished):
    """The MQTT sink: at least once, its messages at the broker before a checkpoint
    completes; it names no files."""

    def output(self) -> SinkOutput:
        return SinkOutput()
