"""The user's per-record functions (``map``, ``flat_map``, ``filter``, ``assign_timestamps``
with a function) over a column batch's rows (columnbatches.py), so that a chain of
lambdas keeps its batches columns: Arrow to and from its Spark worker, routed and cut
at the exchange without a Python object per record (docs/streaming.md, "Columnar
batches").

Per batch the records are made Python values once (``arrowbuffers.records_of``: one
``to_pylist`` per column, zipped), the function runs in a tight loop over them, and
what it returns is made columns again in one go (``arrowbuffers.native_columns``, the
exchange's own check); timestamps stay the batch's column. Each stage is its per-record
twin (streamfunctions.py) with ``over_columns``: the same function on the same records
in the same order. When its records out cannot be columns (dicts, mixed types) it gives
the elements and the stages after it run per record. When a stage over columns raises,
``ColumnarChain`` runs the whole batch again per record, so the error the task fails with
is the per-record path's (the first record that fails there, from the user's line).

Runs in Spark's Python workers (cloudpickled by reference: this module imports only the
record model, the stream functions and pyarrow/numpy).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from clusterdeck.core.engine.arrowbuffers import (
    TIMESTAMP_COLUMN,
    elements_of,
    native_columns,
    records_of,
)
from clusterdeck.core.engine.streamfunctions import (
    BATCH,
    Element,
    FilterElement,
    FlatMapElement,
    MapElement,
    Timestamped,
)


class RowMap(MapElement):
    """``map`` over a column batch's rows."""

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
        return with_records(batch.column(0), list(map(self.fn, records_of(batch))))


class RowFlatMap(FlatMapElement):
    """``flat_map`` over a column batch's rows: each record out with its record's
    timestamp."""

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
        stamps: list[float | None] = []
        out: list[Any] = []
        for stamp, record in zip(batch.column(0).to_pylist(), records_of(batch),
                                 strict=True):
            produced = list(self.fn(record))
            out.extend(produced)
            stamps.extend([stamp] * len(produced))
        return with_records(pa.array(stamps, pa.float64()), out)


class RowFilter(FilterElement):
    """``filter`` over a column batch's rows: the rows kept taken from the batch."""

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        kept = list(map(bool, map(self.fn, records_of(batch))))
        return batch.filter(pa.array(kept, pa.bool_()))


class RowTimestamped(Timestamped):
    """``assign_timestamps(fn)`` over a column batch's rows: the times made the
    timestamp column at once, the largest into ``BATCH``; anything but finite numbers
    goes per record, which says which record's time is wrong."""

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
        times = list(map(self.fn, records_of(batch)))
        if not all(map(_is_seconds, set(map(type, times)))):
            return list(self.over(iter(elements_of(batch))))  # raises as it would
        stamps = np.array(times, dtype=np.float64)
        if not np.isfinite(stamps).all():
            return list(self.over(iter(elements_of(batch))))
        if len(stamps) and stamps.max() > BATCH.largest:
            BATCH.largest = float(stamps.max())
        return batch.set_column(0, TIMESTAMP_COLUMN, pa.array(stamps, pa.float64()))


def _is_seconds(kind: type) -> bool:
    """What ``Timestamped`` takes for a time: an int or float, not a bool."""
    return issubclass(kind, int | float) and not issubclass(kind, bool)


def with_records(timestamps: pa.Array, records: list[Any]) -> pa.RecordBatch | list[Element]:
    """``records`` with ``timestamps`` as a column batch, or as elements when they are
    not alike enough to be the exchange's typed columns (arrowbuffers.py)."""
    columns = native_columns(records)
    if columns is None:
        return list(zip(timestamps.to_pylist(), records, strict=True))
    return pa.record_batch([timestamps, *(array for _, array in columns)],
                           names=[TIMESTAMP_COLUMN, *(name for name, _ in columns)])
