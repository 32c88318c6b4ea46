"""A streaming batch as Arrow columns from its source to the exchange, without a Python
object per record (docs/streaming.md, "Columnar batches").

A *column batch* is a ``pyarrow.RecordBatch`` in the exchange's format (arrowbuffers.py):
a ``timestamp`` column (float64, null before ``assign_timestamps``) and the records as
typed columns, ``_1.._n`` for tuples or ``value`` for scalars. Its rows are exactly the
elements ``arrowbuffers.elements_of`` makes of it, so every step here has a per-record
twin that gives the same elements, and falls back to it whenever the columns do not
allow the vectorised form (the twin then gives the same result, or the same error).

- ``rate_batch``: the rate source's records ``(i, "key-<i mod 10>")`` as columns.
- ``ColumnarChain``: a vertex's stages over a column batch, each by its ``over_columns``
  (``map_batches(format="arrow")``, ``assign_timestamps(field=...)``, the user's
  per-record functions over the rows, columnrows.py), then a keyed window's vectorised
  pre-aggregation; once a stage gives elements, the stages after it get elements. A
  stage that raises over columns has the whole batch run again per record, whose result
  or error is the task's.
- ``exchange_batch``: a user's Arrow output as a column batch (lossless casts to the
  exchange's types), or None when it cannot be one.
- ``key_groups``: the rows of a batch grouped by its key fields' values, so the exchange
  hashes one representative record per key (streamio.py) rather than every record.

Runs in Spark's Python workers (``ColumnarChain``, cloudpickled by reference: this module
imports only the record model, the stream functions and pyarrow/numpy) and on the slot
thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from clusterdeck.core.engine.arrowbuffers import (
    MAX_FIELDS,
    NATIVE_TYPES,
    TIMESTAMP_COLUMN,
    elements_of,
)
from clusterdeck.core.engine.columnrows import RowStage, over_rows, takes_rows
from clusterdeck.core.engine.records import SCALAR_COLUMN, field_value
from clusterdeck.core.engine.streamfunctions import (
    BATCH,
    Chained,
    Element,
    PartitionFunction,
    Stage,
    Timestamped,
)
from clusterdeck.core.streaming.ratesource import rate_record

_ACCEPTED = frozenset(NATIVE_TYPES.values())
_RATE_KEYS = pa.array([rate_record(index)[1] for index in range(10)], pa.string())
_TIME_TYPES = frozenset({pa.int64(), pa.float64()})
_GROUPED_TYPES = frozenset({pa.int64(), pa.string(), pa.binary(), pa.bool_()})
"""Key column types whose Arrow equality is Python's equality of the values they give
back (floats are not: 0.0 and -0.0, NaN), so one representative per group stands for
every record of it."""


_TABLE_ROWS = 4
"""``dense_codes`` tables values below this many times the values' count (a table of a
few bytes a value is cheaper than hashing them)."""


class ColumnarStage(Stage, Protocol):
    """A stage that also runs over a column batch: the batch it makes, or the elements
    its per-record twin would (once the columns no longer allow the vectorised form)."""

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]: ...


class ColumnarTail(Protocol):
    """A keyed operator's pre-aggregation that also takes a column batch."""

    def __call__(self, elements: Iterator[Element]) -> Iterable[Any]: ...

    def over_columns(self, batch: pa.RecordBatch) -> list[Any]: ...


def takes_columns(stage: Any) -> bool:
    return callable(getattr(stage, "over_columns", None))


def rate_batch(indices: range | list[int]) -> pa.RecordBatch:
    """``rate_record(i)`` for each index, as a column batch with no timestamps."""
    values = np.arange(indices.start, indices.stop, indices.step, dtype=np.int64) \
        if isinstance(indices, range) else np.array(indices, dtype=np.int64)
    keys = pa.DictionaryArray.from_arrays(pa.array(values % len(_RATE_KEYS)), _RATE_KEYS)
    return pa.record_batch([pa.nulls(len(values), pa.float64()), pa.array(values),
                            keys.dictionary_decode()],
                           names=[TIMESTAMP_COLUMN, "_1", "_2"])


class FieldTimestamped(Timestamped):
    """``assign_timestamps(field=...)``: the record's event time is one of its fields, a
    number of seconds; over columns, that column made the timestamp column at once."""

    def __init__(self, field: str | int) -> None:
        super().__init__(_FieldOf(field))
        self.field = field

    def over_columns(self, batch: pa.RecordBatch) -> pa.RecordBatch | list[Element]:
        column = field_column(batch, self.field)
        if column is None or column.null_count or column.type not in _TIME_TYPES:
            return list(self.over(iter(elements_of(batch))))  # raises as it would
        times = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
        if not np.isfinite(times).all():
            return list(self.over(iter(elements_of(batch))))
        if len(times) and times.max() > BATCH.largest:
            BATCH.largest = float(times.max())
        return batch.set_column(0, TIMESTAMP_COLUMN, pa.array(times, pa.float64()))


class _FieldOf:
    """A record's field (picklable)."""

    def __init__(self, field: str | int) -> None:
        self.field = field

    def __call__(self, record: Any) -> Any:
        return field_value(record, self.field)


class ColumnarChain:
    """A batch's partition function over ``[column batch]``: the stages in order, then
    the tail if there is one (module docstring). Without a tail its result is
    ``[column batch]``, or the elements once a stage fell back to them."""

    def __init__(self, stages: Sequence[ColumnarStage],
                 tail: ColumnarTail | None = None) -> None:
        self.stages = list(stages)
        self.tail = tail

    def __call__(self, items: Iterator[pa.RecordBatch]) -> list[Any]:
        batch = next(items)
        with suppress(Exception):
            return self._over_columns(batch)
        # it raised: the per-record path's result, or its error alone (not chained to the
        # one above), the first record that fails there, from the user's line
        BATCH.reset()
        return Chained(self.stages, self.tail)(iter(elements_of(batch)))

    def _over_columns(self, batch: pa.RecordBatch) -> list[Any]:
        current: pa.RecordBatch | list[Element] = batch
        index = 0
        while index < len(self.stages):
            if isinstance(current, list):
                return self._per_record(index, current)
            run = self._row_run(index)
            if run:  # per-record functions: the rows stay Python values between them
                current = over_rows(run, current)
                index += len(run)
            else:
                current = self.stages[index].over_columns(current)
                index += 1
        if isinstance(current, list):
            return self._per_record(len(self.stages), current)
        if self.tail is None:
            return [current]
        return self.tail.over_columns(current)

    def _row_run(self, start: int) -> list[RowStage]:
        """The per-record functions from ``start`` on, up to the next other stage."""
        run: list[RowStage] = []
        for stage in self.stages[start:]:
            if not takes_rows(stage):
                break
            run.append(stage)  # type: ignore[arg-type]
        return run

    def _per_record(self, index: int, elements: list[Element]) -> list[Any]:
        tail: PartitionFunction | None = self.tail
        return Chained(self.stages[index:], tail)(iter(elements))


def exchange_batch(timestamps: pa.Array, out: pa.Table | pa.RecordBatch) -> pa.RecordBatch | None:
    """``out``'s columns with ``timestamps`` as a column batch: named ``_1.._n`` (``value``
    for one column, whose rows are scalars), cast without loss to the exchange's types
    (narrower ints, float32, large or dictionary strings); None when a column cannot be
    (its rows then go per record)."""
    if not 0 < out.num_columns <= MAX_FIELDS:
        return None
    arrays = []
    for column in out.columns:
        array = _native(column.combine_chunks() if isinstance(column, pa.ChunkedArray)
                        else column)
        if array is None:
            return None
        arrays.append(array)
    names = [SCALAR_COLUMN] if len(arrays) == 1 \
        else [f"_{index + 1}" for index in range(len(arrays))]
    return pa.record_batch([timestamps, *arrays], names=[TIMESTAMP_COLUMN, *names])


def _native(array: pa.Array) -> pa.Array | None:
    kind = array.type
    if pa.types.is_dictionary(kind):
        return _native(array.dictionary_decode())
    if kind in _ACCEPTED:
        return array
    if pa.types.is_null(kind) or (pa.types.is_integer(kind) and kind != pa.uint64()):
        return array.cast(pa.int64())
    if kind == pa.float32():
        return array.cast(pa.float64())
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return array.cast(pa.string())
    if pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return array.cast(pa.binary())
    return None


def field_column(batch: pa.RecordBatch, field: str | int | None) -> pa.Array | None:
    """The column holding a record field as ``records.field_value`` reads it (a position,
    ``_k`` of a tuple, ``value`` or position 0 of a scalar; None: the scalar itself);
    None when the field is not a column (a name of another kind: the per-record path
    says why)."""
    names = batch.schema.names[1:]
    if names == [SCALAR_COLUMN]:
        return batch.column(1) if field in (None, 0, SCALAR_COLUMN) else None
    if names[:1] != ["_1"]:
        return None
    if isinstance(field, int) and not isinstance(field, bool) and 0 <= field < len(names):
        return batch.column(field + 1)
    if isinstance(field, str) and field in names:
        return batch.column(field)
    return None


def key_groups(batch: pa.RecordBatch,
               fields: Sequence[str | int]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(first row of each key, each row's key)``: the rows grouped by the values of
    their key fields, nulls a value of their own; None when a key field is not a column
    of a type whose values compare as Python's (``_GROUPED_TYPES``)."""
    codes: np.ndarray | None = None
    for field in fields:
        column = field_column(batch, field)
        if column is None or column.type not in _GROUPED_TYPES:
            return None
        try:
            encoded = column.dictionary_encode(null_encoding="encode")
        except pa.ArrowNotImplementedError:
            return None
        part = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        codes = part if codes is None \
            else dense_codes(codes * max(1, len(encoded.dictionary)) + part)
    if codes is None:
        codes = np.zeros(batch.num_rows, dtype=np.int64)
    return first_rows(codes), codes


def dense_codes(values: np.ndarray) -> np.ndarray:
    """A code per int64 value, ``0..k-1`` for its ``k`` distinct values (equal values,
    equal codes): values in a small range ``0..~n`` (codes combined) by a table of the
    range, any others by Arrow's hash table; never a sort (``np.unique`` sorts, and took
    most of a batch's grouping time)."""
    if len(values) and values.min() >= 0 and values.max() < _TABLE_ROWS * len(values):
        present = np.zeros(int(values.max()) + 1, dtype=bool)
        present[values] = True
        return (np.cumsum(present) - 1)[values]
    encoded = pa.array(values, pa.int64()).dictionary_encode()
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def first_rows(codes: np.ndarray) -> np.ndarray:
    """The first row of each code of ``dense_codes``."""
    count = int(codes.max()) + 1 if len(codes) else 0
    firsts = np.full(count, len(codes), dtype=np.int64)
    np.minimum.at(firsts, codes, np.arange(len(codes)))
    return firsts


def representatives(batch: pa.RecordBatch, rows: np.ndarray) -> list[Any]:
    """The records of ``rows``, as the per-record path has them."""
    return [record for _, record in elements_of(batch.take(pa.array(rows)))]
