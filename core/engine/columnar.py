"""A keyed window's count, sum, min, max or mean pre-aggregated over a whole batch with
numpy, not with a Python call per record (docs/streaming.md, "Keyed streams and windows").

``window_partials(op, assigner, fired_to, key_of)`` gives a partition function,
``Iterator[Element] -> list`` of partials, that returns exactly what the per-record path
returns, ``flatMap(WindowContributions(...))`` then ``mapPartitions(PreAggregated(merge))``:
one ``((key, start, end), (partial, timestamp))`` per key and window in order of first
appearance, and ``(LATE, Late(n))`` where the first late record was. It is None (the caller
keeps the per-record path) unless the window's function is declarative
(windowaggregates.py). A key function runs over a column batch's rows (Python's equality
tells its keys apart); a key given by fields is grouped by its columns.

Per batch it vectorises when the records are tuples, lists or scalars whose key fields
hold one plain type each (int, str, bytes, bool, or float without NaN) and whose value
field holds ints (whose sum stays in int64) or floats; records grouped by key and window
start by Arrow's hash table (``columnbatches.dense_codes``), windows assigned with the same
floating-point operations as ``eventtime``'s assigners, sums accumulated in record order
(``np.add.at``, unbuffered) so float sums round as Python's. Any other batch (dicts, Rows,
mixed types, NaN among the values of a min, a missing timestamp) goes through the
per-record functions, so the result, or the error, is the same.

Runs in Spark's Python workers (cloudpickled by reference: this module imports only the
record model, the window functions, the plan's names and numpy/pyarrow).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from clusterdeck.core.engine import windowaggregates
from clusterdeck.core.engine.arrowbuffers import elements_of, records_of
from clusterdeck.core.engine.columnbatches import (
    dense_codes,
    field_column,
    first_rows,
    key_groups,
)
from clusterdeck.core.engine.records import SCALAR_COLUMN, field_key
from clusterdeck.core.engine.streamfunctions import (
    LATE,
    Element,
    Late,
    PreAggregated,
    WindowContributions,
    state_key,
)
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.plan import KeySpec
from clusterdeck.core.streaming.eventtime import SlidingWindows, WindowAssigner

if TYPE_CHECKING:
    from clusterdeck.core.protocol.jobgraph import OperatorSpec

MAX_WINDOWS = 1002
"""Windows a record may fall into here (the job API allows 1,000 per record; floating
point may add one): more and the batch goes per record."""
_INT64 = 2**63
_EXACT = 2.0**52  # floats below this are exact integers when integral, and so are their ints
_SCALARS = frozenset({int, float, str, bool, bytes})
_KEY_TYPES = frozenset({int, float, str, bool, bytes})


KeysAt = Callable[[list[int]], list[Any]]  # the keys of given rows (or pairs' records)


class Unvectorisable(Exception):
    """This batch cannot be vectorised; the per-record path takes it."""


def window_partials(op: OperatorSpec, assigner: WindowAssigner, fired_to: float,
                    key_of: Callable[[Any], Any]) -> ColumnarWindowPartials | None:
    """The vectorised pre-aggregation of a keyed window operator's batch (``key_of``: its
    key of a record), or None when its function is ``reduce``/``aggregate``."""
    if op.kind != plan.WINDOW:
        return None
    key, function = KeySpec.from_params(op.params["key"]), op.params["function"]
    if function not in windowaggregates.DECLARATIVE:
        return None
    return ColumnarWindowPartials(key.fields, function, op.params.get("field"), assigner,
                                  fired_to, key_of if key.by_function else None)


class ColumnarWindowPartials:
    """A batch's window partials, vectorised when the batch allows it (module docstring)."""

    def __init__(self, fields: tuple[str | int, ...], function: str,
                 field: str | int | None, assigner: WindowAssigner, fired_to: float,
                 key_function: Callable[[Any], Any] | None = None) -> None:
        """``key_function``: the user's key of a record, when the key is not ``fields``."""
        self.fields = fields
        self.function = function
        self.field = field
        self.assigner = assigner
        self.fired_to = fired_to
        self.key_function = key_function
        self._contributions = WindowContributions(
            key_function or field_key(fields), assigner,
            windowaggregates.contribution(function, field), fired_to)
        self._fold = PreAggregated(windowaggregates.merge(function))

    def __call__(self, elements: Iterable[Element]) -> list[tuple[Any, Any]]:
        batch = list(elements)
        if not batch:
            return []
        try:
            return self.vectorised(batch)
        except Unvectorisable:
            return self.per_record(batch)

    def per_record(self, batch: Sequence[Element]) -> list[tuple[Any, Any]]:
        """What today's path gives: a Python call per record."""
        contributions = self._contributions
        return list(self._fold(pair for element in batch for pair in contributions(element)))

    def over_columns(self, batch: pa.RecordBatch) -> list[tuple[Any, Any]]:
        """A column batch's partials (columnbatches.py): from its columns without a
        Python object per record when they allow it, else as ``__call__`` gives them."""
        if not batch.num_rows:
            return []
        try:
            return self.from_columns(batch)
        except Unvectorisable:
            return self.per_record(elements_of(batch))

    def from_columns(self, batch: pa.RecordBatch) -> list[tuple[Any, Any]]:
        """Raises Unvectorisable unless its timestamps are all there and its key fields
        are columns whose values compare as Python's (columnbatches.key_groups)."""
        stamps = batch.column(0)
        if stamps.null_count:
            raise Unvectorisable("a record without a timestamp")
        times = stamps.to_numpy(zero_copy_only=False)
        if not np.isfinite(times).all():
            raise Unvectorisable("a timestamp that is not finite")
        if self.key_function is not None:
            keys, keys_at = self._keyed_by_function(records_of(batch))
        else:
            keys, keys_at = self._keyed_by_fields(batch)

        def values() -> np.ndarray:
            column = field_column(batch, self.field)
            if column is None:
                raise Unvectorisable(f"the field {self.field!r} is not a column")
            return _values(column.to_pylist(), self.function)

        return self._folded(times, keys, keys_at, values)

    def _keyed_by_fields(self, batch: pa.RecordBatch) -> tuple[np.ndarray, KeysAt]:
        """Each row's key code, and the keys of given rows, from the key columns."""
        groups = key_groups(batch, self.fields)
        if groups is None:
            raise Unvectorisable("a key field that is not a column of ints, str, bytes or "
                                 "bools")
        key_arrays = [field_column(batch, field) for field in self.fields]

        def keys_at(rows: list[int]) -> list[Any]:
            taken = [array.take(pa.array(rows, pa.int64())).to_pylist()
                     for array in key_arrays if array is not None]
            return taken[0] if len(taken) == 1 else list(zip(*taken, strict=True))

        return groups[1], keys_at

    def _keyed_by_function(self, records: list[Any]) -> tuple[np.ndarray, KeysAt]:
        """Each record's key code, and the keys of given records, by the user's key
        function run over the rows, its keys told apart by a dict as the per-record fold
        tells them apart. It runs on late records too, which the per-record path never
        keys: if it raises, ``ColumnarChain`` runs the batch per record, which says."""
        key_of = self.key_function
        assert key_of is not None
        keys = [state_key(key_of(record)) for record in records]
        codes: dict[Any, int] = {}
        coded = np.fromiter((codes.setdefault(key, len(codes)) for key in keys),
                            dtype=np.int64, count=len(keys))
        return coded, lambda rows: [keys[row] for row in rows]

    def vectorised(self, batch: Sequence[Element]) -> list[tuple[Any, Any]]:
        """Raises Unvectorisable when the batch is not of the shape the module names (a
        key function only over columns: ``from_columns``)."""
        if self.key_function is not None:
            raise Unvectorisable("a key function, which the batch's elements run per record")
        timestamps = list(map(itemgetter(0), batch))
        records = list(map(itemgetter(1), batch))
        if set(map(type, timestamps)) != {float}:
            raise Unvectorisable("timestamps that are not all floats")
        times = np.array(timestamps, dtype=np.float64)
        if not np.isfinite(times).all():
            raise Unvectorisable("a timestamp that is not finite")
        shape = _shape(records)
        key_columns = [_column(records, shape, field) for field in self.fields]

        def keys_at(rows: list[int]) -> list[Any]:
            if len(key_columns) == 1:
                return list(map(key_columns[0].__getitem__, rows))
            return [tuple(column[row] for column in key_columns) for row in rows]

        return self._folded(times, _group_codes(key_columns), keys_at,
                          lambda: _values(_column(records, shape, self.field), self.function))

    def _folded(self, times: np.ndarray, keys: np.ndarray,
              keys_at: Callable[[list[int]], list[Any]],
              values: Callable[[], np.ndarray]) -> list[tuple[Any, Any]]:
        """The partials of records at ``times`` with key codes ``keys``: ``keys_at``
        gives the keys of given records, ``values`` their value field (not for count)."""
        windows = _Windows(self.assigner, times, self.fired_to)
        pairs = windows.record_of_pair
        if len(pairs):
            window_codes = windows.window_codes()
            groups = dense_codes(keys[pairs] * (int(window_codes.max()) + 1) + window_codes)
            count = int(groups.max()) + 1
        else:
            groups, count = np.zeros(0, dtype=np.int64), 0
        first = first_rows(groups)  # each group's first pair
        partials = self._partials(values, pairs, groups, count)
        latest = np.full(count, -np.inf)
        paired = times[pairs]
        np.maximum.at(latest, groups, paired)
        # the first of the group's largest, as the per-record fold keeps it: 0.0 and -0.0
        # are equal there, and numpy's maximum may give either
        largest = np.flatnonzero(paired == latest[groups])
        first_largest = np.full(count, len(pairs), dtype=np.int64)
        np.minimum.at(first_largest, groups[largest], largest)
        latest = paired[first_largest] if count else latest
        out = self._entries(keys_at, windows, first, partials, latest.tolist())
        late = windows.late_records
        if len(late):
            out.append((int(late[0]) * windows.width, (LATE, Late(len(late)))))
        out.sort(key=itemgetter(0))
        return [entry for _, entry in out]

    def _partials(self, values_of: Callable[[], np.ndarray], pairs: np.ndarray,
                  groups: np.ndarray, count: int) -> list[Any]:
        counts = np.bincount(groups, minlength=count).tolist()
        if self.function == "count":
            return counts
        values = values_of()[pairs]
        if self.function in ("sum", "mean"):
            totals = np.zeros(count, values.dtype) if values.dtype.kind == "i" \
                else np.full(count, -0.0)  # -0.0 + v is v, for every v: a sum starts at v
            np.add.at(totals, groups, values)
            if self.function == "sum":
                return totals.tolist()
            return list(zip(totals.tolist(), counts, strict=True))
        smallest = self.function == "min"
        if values.dtype.kind == "i":
            start = np.iinfo(np.int64).max if smallest else np.iinfo(np.int64).min
        else:
            start = np.inf if smallest else -np.inf
        folded = np.full(count, start, dtype=values.dtype)
        (np.minimum if smallest else np.maximum).at(folded, groups, values)
        return folded.tolist()

    def _entries(self, keys_at: Callable[[list[int]], list[Any]], windows: _Windows,
                 first: np.ndarray, partials: list[Any],
                 latest: list[float]) -> list[tuple[int, Any]]:
        """One ``(position, ((key, start, end), (partial, timestamp)))`` per group, the key
        taken from the group's first record, as the per-record fold keeps it (its fields
        are plain scalars: the key is the one field, or the tuple of them)."""
        size = self.assigner.size
        positions = windows.position_of_pair[first].tolist()
        starts = windows.start_of_pair[first].tolist()
        keys = keys_at(windows.record_of_pair[first].tolist())
        return [(position, ((key, start, start + size), (partial, timestamp)))
                for position, start, key, partial, timestamp
                in zip(positions, starts, keys, partials, latest, strict=True)]


class _Windows:
    """The (record, window) pairs of a batch that are not late, in record order: each
    pair's record, window start and place in the per-record output (``width`` places a
    record); and the records with none (late)."""

    def __init__(self, assigner: WindowAssigner, times: np.ndarray, fired_to: float) -> None:
        sliding = isinstance(assigner, SlidingWindows)
        size = assigner.size
        slide = assigner.slide if isinstance(assigner, SlidingWindows) else size
        # as eventtime: floor((t - offset) / slide) * slide + offset (math.floor's int made
        # float: + 0.0, no -0.0), then back by slide while start > t - size (sliding)
        index = np.floor((times - assigner.offset) / slide) + 0.0
        start = index * slide + assigner.offset
        self._index_of_pair: np.ndarray | None = None
        if not sliding:  # one window a record: its pairs are its records, no matrix
            kept = start + size > fired_to
            self.width = 1
            self.record_of_pair = self.position_of_pair = np.flatnonzero(kept)
            self.start_of_pair = start[self.record_of_pair]
            self.late_records = np.flatnonzero(~kept)
            self._index_of_pair = index[self.record_of_pair]
            return
        bound = times - size
        alive = start > bound if sliding else np.ones(len(times), dtype=bool)
        starts, alives = [], []
        while alive.any():
            if len(starts) == MAX_WINDOWS:
                raise Unvectorisable("too many windows per record")
            starts.append(start)
            alives.append(alive)
            start = start - slide
            alive = alive & (start > bound) if sliding else np.zeros_like(alive)
        self.width = max(1, len(starts))
        shape = (len(times), len(starts))
        start_matrix = np.stack(starts, axis=1) if starts else np.zeros(shape)
        alive_matrix = np.stack(alives, axis=1) if alives else np.zeros(shape, dtype=bool)
        taken = alive_matrix & (start_matrix + size > fired_to)
        # column k is a record's k-th window back from the latest: the per-record path
        # lists them the other way round
        windows = alive_matrix.sum(axis=1)
        records, columns = np.nonzero(taken)  # row-major: by record, in order
        self.record_of_pair = records
        self.start_of_pair = start_matrix[records, columns]
        self.position_of_pair = records * self.width + (windows[records] - 1 - columns)
        self.late_records = np.flatnonzero(~taken.any(axis=1))

    def window_codes(self) -> np.ndarray:
        """A code per pair, equal where the pairs' windows are: from the windows' index
        (``start = index * size + offset``) when it is an exact integer, else from the
        starts' bits (+ 0.0 makes -0.0 the 0.0 it equals)."""
        index = self._index_of_pair
        if index is not None and len(index) and np.abs(index).max() < _EXACT:
            whole = index.astype(np.int64)
            return dense_codes(whole - whole.min())
        return dense_codes((self.start_of_pair + 0.0).view(np.int64))


def _shape(records: Sequence[Any]) -> type:
    """tuple, list or ``object`` (scalars); Unvectorisable for anything else or a mix."""
    kinds = set(map(type, records))
    if kinds == {tuple} or kinds == {list}:
        return kinds.pop()
    if kinds <= _SCALARS:
        return object
    raise Unvectorisable(f"records of {len(kinds)} kinds, or not tuples, lists or scalars")


def _column(records: Sequence[Any], shape: type, field: str | int | None) -> Sequence[Any]:
    """One field of every record, as ``records.field_value`` reads it."""
    if field is None or (shape is object and field in (0, SCALAR_COLUMN)):
        return records
    if isinstance(field, str) and shape is tuple and field[:1] == "_" and field[1:].isdigit():
        field = int(field[1:]) - 1
    if not isinstance(field, int) or shape is object:
        raise Unvectorisable(f"the field {field!r} of {shape.__name__} records")
    try:
        return list(map(itemgetter(field), records))
    except IndexError:
        raise Unvectorisable(f"a record without position {field}") from None


def _group_codes(columns: list[Sequence[Any]]) -> np.ndarray:
    """A code per record, equal where the key (the columns' values) is equal."""
    codes = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        kinds = set(map(type, column))
        if len(kinds) != 1 or not kinds <= _KEY_TYPES:
            raise Unvectorisable("a key field of several types, or not a plain one")
        kind = kinds.pop()
        try:
            if kind in (str, bytes):
                array = pa.array(column, pa.string() if kind is str else pa.binary())
                part = array.dictionary_encode().indices.to_numpy().astype(np.int64)
            else:
                values = np.array(column, dtype=np.float64 if kind is float else np.int64)
                if kind is float and np.isnan(values).any():
                    raise Unvectorisable("a NaN key: NaNs are keys of their own in Python")
                # equal floats, equal bits: + 0.0 makes -0.0 the 0.0 it equals
                part = dense_codes((values + 0.0).view(np.int64) if kind is float
                                   else values)
        except (OverflowError, UnicodeEncodeError, pa.ArrowException):
            raise Unvectorisable("a key beyond int64, or a str with a lone surrogate") \
                from None
        codes = dense_codes(codes * (int(part.max()) + 1) + part)
    return codes


def _values(column: Sequence[Any], function: str) -> np.ndarray:
    """The value field as int64 (sums staying within it) or float64, as Python would add
    or compare them; Unvectorisable otherwise."""
    kinds = set(map(type, column))
    if kinds == {int}:
        try:
            values = np.array(column, dtype=np.int64)
        except OverflowError:
            raise Unvectorisable("an int beyond int64") from None
        largest = max(-int(values.min()), int(values.max()))
        if function in ("sum", "mean") and largest * len(values) >= _INT64:
            raise Unvectorisable("a sum that may leave int64")
        return values
    if kinds == {float}:
        values = np.array(column, dtype=np.float64)
        signs = np.signbit(values[values == 0])
        if function in ("min", "max") and (np.isnan(values).any()
                                          or (signs.any() and not signs.all())):
            raise Unvectorisable("NaN, or 0.0 and -0.0, which Python's min and max order "
                                 "by place")
        return values
    raise Unvectorisable("values that are not all ints or all floats")
