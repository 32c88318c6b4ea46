"""The user's per-record functions (``map``, ``flat_map``, ``filter``, ``assign_timestamps``
with a function) over a column batch's rows (columnbatches.py), so that a chain of
lambdas keeps its batches columns: Arrow to and from its Spark worker, routed and cut
at the exchange without a Python object per record (docs/streaming.md, "Columnar
batches").

Per batch the records are made Python values once (``arrowbuffers.records_and_columns``:
one ``to_pylist`` per column, zipped) and stay so through a whole run of such stages
(``Rows``, ``over_rows``): each function runs in a tight loop over them, and what the
last one returns is made columns again in one go (``arrowbuffers.native_columns``, the
exchange's own check); timestamps stay the batch's column until a stage makes new ones.
A field the functions passed on (the very objects made of an input column, row for row:
a ``map`` keeping ``record[0]``) is that input column again, neither checked nor
converted; a ``filter`` or ``flat_map`` ends that (its rows are no longer the batch's).
Each stage is its per-record twin (streamfunctions.py) with ``over_rows``: the same
function on the same records in the same order. When the run's records out cannot be
columns (dicts, mixed types) it gives the elements and the stages after it run per
record. When a stage over the rows raises (a time that is not a finite number included),
``ColumnarChain`` runs the whole batch again per record, so the error the task fails with
is the per-record path's (the first record that fails there, from the user's line).

Runs in Spark's Python workers (cloudpickled by reference: this module imports only the
record model, the stream functions and pyarrow/numpy).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from clusterdeck.core.engine.arrowbuffers import (
    TIMESTAMP_COLUMN,
    GivenColumn,
    native_columns,
    records_and_columns,
)
from clusterdeck.core.engine.streamfunctions import (
    BATCH,
    Element,
    FilterElement,
    FlatMapElement,
    MapElement,
    Timestamped,
)


class Rows:
    """A column batch's rows as Python values between row stages: each record as the
    per-record path has it, and its timestamp (the batch's column, or a list once a
    ``flat_map`` repeated them). A run of row stages passes them on as they are, so the
    records are made Python values once and columns again once, whatever the run's
    length. ``columns``: the batch's record columns with the values made of them, while
    the rows are still the batch's row for row (a ``map`` keeps them, a ``filter`` not)."""

    __slots__ = ("columns", "records", "stamps")

    def __init__(self, stamps: pa.Array | list[float | None], records: list[Any],
                 columns: list[GivenColumn] | None = None) -> None:
        self.stamps = stamps
        self.records = records
        self.columns = columns or []

    @classmethod
    def of(cls, batch: pa.RecordBatch) -> Rows:
        return cls(batch.column(0), *records_and_columns(batch))

    def out(self) -> pa.RecordBatch | list[Element]:
        """A column batch again, or the elements when the records are not alike enough
        to be the exchange's typed columns."""
        stamps = self.stamps
        if isinstance(stamps, list):
            stamps = pa.array(stamps, pa.float64())
        return with_records(stamps, self.records, self.columns)


class RowStage(Protocol):
    """A per-record function's stage that runs over ``Rows``."""

    def over_rows(self, rows: Rows) -> Rows: ...


def takes_rows(stage: Any) -> bool:
    return callable(getattr(stage, "over_rows", None))


def over_rows(stages: Sequence[RowStage], batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
    """``stages`` in order over ``batch``'s rows: made Python values once, each stage
    in a tight loop over them, columns again at the end."""
    rows = Rows.of(batch)
    for stage in stages:
        rows = stage.over_rows(rows)
    return rows.out()


class RowMap(MapElement):
    """``map`` over a column batch's rows."""

    def over_rows(self, rows: Rows) -> Rows:
        return Rows(rows.stamps, list(map(self.fn, rows.records)), rows.columns)

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
        return over_rows([self], batch)


class RowFlatMap(FlatMapElement):
    """``flat_map`` over a column batch's rows: each record out with its record's
    timestamp."""

    def over_rows(self, rows: Rows) -> Rows:
        stamps: list[float | None] = []
        out: list[Any] = []
        given = rows.stamps if isinstance(rows.stamps, list) else rows.stamps.to_pylist()
        for stamp, record in zip(given, rows.records, strict=True):
            produced = list(self.fn(record))
            out.extend(produced)
            stamps.extend([stamp] * len(produced))
        return Rows(stamps, out)

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
        return over_rows([self], batch)


class RowFilter(FilterElement):
    """``filter`` over a column batch's rows: the rows kept, with their timestamps."""

    def over_rows(self, rows: Rows) -> Rows:
        kept = list(map(bool, map(self.fn, rows.records)))
        stamps = rows.stamps
        stamps = list(compress(stamps, kept)) if isinstance(stamps, list) \
            else stamps.filter(pa.array(kept, pa.bool_()))
        return Rows(stamps, list(compress(rows.records, kept)))

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
        return over_rows([self], batch)


class NotSeconds(ValueError):
    """A time from ``assign_timestamps(fn)`` that is not a finite number of seconds: the
    batch runs again per record, which raises the per-record path's error for it."""


class RowTimestamped(Timestamped):
    """``assign_timestamps(fn)`` over a column batch's rows: the times made the
    timestamp column at once, the largest into ``BATCH``; anything but finite numbers
    has the batch run per record, which says which record's time is wrong."""

    def over_rows(self, rows: Rows) -> Rows:
        times = list(map(self.fn, rows.records))
        if not all(map(_is_seconds, set(map(type, times)))):
            raise NotSeconds("a time that is not a number")
        stamps = np.array(times, dtype=np.float64)
        if not np.isfinite(stamps).all():
            raise NotSeconds("a time that is not finite")
        if len(stamps) and stamps.max() > BATCH.largest:
            BATCH.largest = float(stamps.max())
        return Rows(pa.array(stamps, pa.float64()), rows.records, rows.columns)

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
        return over_rows([self], batch)


def _is_seconds(kind: type) -> bool:
    """What ``Timestamped`` takes for a time: an int or float, not a bool."""
    return issubclass(kind, int | float) and not issubclass(kind, bool)


def with_records(timestamps: pa.Array, records: list[Any],
                 given: Sequence[GivenColumn] = ()) -> pa.RecordBatch | list[Element]:
    """``records`` with ``timestamps`` as a column batch, or as elements when they are
    not alike enough to be the exchange's typed columns (arrowbuffers.py; ``given``:
    columns whose very values a field may hold)."""
    columns = native_columns(records, given)
    if columns is None:
        return list(zip(timestamps.to_pylist(), records, strict=True))
    return pa.record_batch([timestamps, *(array for _, array in columns)],
                           names=[TIMESTAMP_COLUMN, *(name for name, _ in columns)])
