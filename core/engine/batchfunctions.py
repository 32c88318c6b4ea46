"""``map_batches``: a user function given a whole batch of records at once (Spark's
``mapPartitions``, or ``mapInArrow`` with ``format="arrow"``), wherever a chain runs.

A batch is what the chain has at hand: a streaming subtask's micro-batch (in its
long-lived Spark task), a batch job's Spark partition, or a locally executed subtask's
records (localexecution.py). ``BatchFunction`` is the one place that calls the user's
function, so every path gives it the same thing and reads back the same records:

- ``records``: ``fn(records: list)`` returns an iterable of records;
- ``arrow``: ``fn(table: pyarrow.Table)`` gets the batch as the columns a streaming
  exchange would send (arrowbuffers.py: typed ``_1.._n`` for tuples of primitives,
  ``value`` for scalars) and returns a Table or RecordBatch, whose rows come back as
  tuples (the values themselves from a one-column table). A batch that cannot be such
  columns fails, naming its records' types.

An empty batch is not given to the function (an empty Arrow batch would have no columns
to name). In a streaming chain (``BatchElements``) every record out carries the largest
timestamp of the batch in, as a Flink function over a batch or window emits at its end:
no record out is ever earlier than the watermark its inputs were under.

Runs in Spark's Python workers (cloudpickled by reference: this module imports only the
record model, the stream element types and pyarrow) or on a slot thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clusterdeck.core.engine.arrowbuffers import elements_of, native_columns
from clusterdeck.core.engine.columnbatches import exchange_batch
from clusterdeck.core.engine.records import RECORD_COLUMN
from clusterdeck.core.engine.streamfunctions import Element

ARROW = "arrow"
_COLUMNS = ("tuples of the same length whose fields each hold one type among int, float, "
            "str, bool, bytes (or None), or such scalars")


class BatchFunction:
    """The user's ``map_batches`` function over one batch (a list or any iterable of
    records): the records it returns, as a list."""

    def __init__(self, fn: Callable[[Any], Any], format: str) -> None:
        self.fn = fn
        self.format = format

    def __call__(self, records: Iterable[Any]) -> list[Any]:
        batch = list(records)
        if not batch:
            return []
        if self.format == ARROW:
            return _rows(self.fn(_table(batch)))
        out = self.fn(batch)
        if out is None or isinstance(out, str | bytes) or not isinstance(out, Iterable):
            raise TypeError(f"map_batches(): the function returned {type(out).__name__}, "
                            "not an iterable of records (a list, a generator)")
        return list(out)


class BatchElements:
    """``map_batches`` as a stage of a streaming chain (streamfunctions.Chained): the
    batch's records through the function, each record out timestamped with the largest
    timestamp in (None when the batch has none: before ``assign_timestamps``)."""

    def __init__(self, fn: Callable[[Any], Any], format: str) -> None:
        self.batch = BatchFunction(fn, format)

    def over(self, elements: Iterator[Element]) -> Iterator[Element]:
        batch = list(elements)
        stamps = [stamp for stamp in map(itemgetter(0), batch) if stamp is not None]
        latest = max(stamps) if stamps else None
        return ((latest, record) for record in self.batch(map(itemgetter(1), batch)))

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
        """A column batch (columnbatches.py) through a ``format="arrow"`` function: its
        record columns are the table the function gets, its result the batch out when
        it can be one; else the elements ``over`` would give."""
        if self.batch.format != ARROW or batch.schema.names[1:] == [RECORD_COLUMN]:
            return list(self.over(iter(elements_of(batch))))
        if not batch.num_rows:
            return []
        latest = pc.max(batch.column(0)).as_py()
        out = self.batch.fn(pa.Table.from_batches([batch.select(batch.schema.names[1:])]))
        rows = out.num_rows if isinstance(out, pa.Table | pa.RecordBatch) else 0
        columns = None
        if rows and out.num_columns:
            timestamps = pa.nulls(rows, pa.float64()) if latest is None \
                else pa.array(np.full(rows, latest, dtype=np.float64))
            columns = exchange_batch(timestamps, out)
        if columns is None:
            return [(latest, record) for record in _rows(out)]
        return columns


def _table(records: list[Any]) -> pa.Table:
    columns = native_columns(records)
    if columns is None:
        kinds = sorted({type(record).__name__ for record in records})
        raise TypeError(
            f"map_batches(format='arrow'): a batch of {', '.join(kinds)} records cannot be "
            f"Arrow columns: they must be {_COLUMNS}; use format='records' for others")
    return pa.Table.from_arrays([array for _, array in columns],
                                names=[name for name, _ in columns])


def _rows(out: Any) -> list[Any]:
    """A returned Table's (or RecordBatch's) rows: tuples, or the values of its one
    column."""
    if not isinstance(out, pa.Table | pa.RecordBatch):
        raise TypeError(f"map_batches(format='arrow'): the function returned "
                        f"{type(out).__name__}, not a pyarrow Table or RecordBatch")
    if out.num_columns == 0:
        if out.num_rows:
            raise ValueError("map_batches(format='arrow'): the function returned "
                             f"{out.num_rows} rows without columns")
        return []
    columns = [column.to_pylist() for column in out.columns]
    if len(columns) == 1:
        return columns[0]
    return list(zip(*columns, strict=True))
