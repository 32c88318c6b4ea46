"""The vectorised window pre-aggregation gives exactly what the per-record path gives
(``flatMap(WindowContributions)`` then ``PreAggregated``): the same partials, in the same
order, of the same types, late records counted the same; a batch it cannot vectorise goes
per record; and a user's per-record aggregate or reduce, the declarative aggregation per
record and the vectorised one fire the same windows."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdeck.core.engine.columnar import (
    ColumnarWindowPartials,
    Unvectorisable,
    window_partials,
)
from clusterdeck.core.engine.keyedstate import WindowState
from clusterdeck.core.engine.records import field_key
from clusterdeck.core.engine.streamfunctions import Late, PreAggregated, WindowContributions
from clusterdeck.core.jobapi.plan import AggregateFunctions, UserCode
from clusterdeck.core.protocol.jobgraph import OperatorSpec
from clusterdeck.core.streaming.eventtime import SlidingWindows, TumblingWindows

FUNCTIONS = ("count", "sum", "min", "max", "mean")


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down; NaN is NaN, -0.0 is not 0.0; Late
    counts by their records."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Late):
        return a.records == b.records
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a)
                                                      == math.copysign(1, b))
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def vectorised(partials: ColumnarWindowPartials, batch: list) -> list:
    """The vectorised partials; refused only for a min or max over both 0.0 and -0.0
    (Python keeps whichever came first), then what the partition function gives."""
    try:
        return partials.vectorised(batch)
    except Unvectorisable:
        values = [record if partials.field is None else record[partials.field]
                  for _, record in batch]
        assert partials.function in ("min", "max")
        assert {math.copysign(1, value) for value in values if value == 0} == {1.0, -1.0}
        return partials(batch)


assigners = st.one_of(
    st.builds(TumblingWindows, st.sampled_from([0.5, 1.0, 3.0, 0.1]),
              st.sampled_from([0.0, 0.05, -0.03])),
    st.builds(lambda size, slides, offset: SlidingWindows(size, size / slides, offset),
              st.sampled_from([1.0, 2.0, 0.3]), st.integers(1, 5),
              st.sampled_from([0.0, 0.01])))
times = st.one_of(st.floats(-20, 20), st.sampled_from([0.0, 1.0, -1.0, 2.5, 0.1 + 0.2]))
int_values = st.integers(-10**6, 10**6)
float_values = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([0.1, 1e16, -1e16, 0.0]))
keys = st.one_of(st.sampled_from(["a", "b", "é", ""]), st.integers(-3, 3),
                 st.sampled_from([1.5, 0.0, -2.0]), st.booleans(), st.sampled_from([b"x", b""]))


@st.composite
def batches(draw: Any) -> tuple[list, tuple, int]:
    """Tuples ``(key, other key, value)`` or lists, keyed by one or two fields; the value
    field all ints or all floats."""
    key_kind = draw(st.sampled_from([st.sampled_from(["a", "b", "é", ""]),
                                     st.integers(-3, 3), st.sampled_from([1.5, 0.0, -2.0]),
                                     st.booleans(), st.sampled_from([b"x", b""])]))
    values = draw(st.sampled_from([int_values, float_values]))
    rows = draw(st.lists(st.tuples(times, key_kind, st.integers(0, 2), values),
                         min_size=1, max_size=60))
    make = draw(st.sampled_from([tuple, list]))
    fields = draw(st.sampled_from([(0,), (0, 1), (1,), ("_1",)] if make is tuple
                                  else [(0,), (0, 1), (1,)]))
    return [(t, make((k, other, v))) for t, k, other, v in rows], fields, 2


@settings(max_examples=200, deadline=None)
@given(batches(), st.sampled_from(FUNCTIONS), assigners, st.sampled_from([-math.inf, -1.0, 0.0,
                                                                          3.0]))
def test_vectorised_partials_are_exactly_the_per_record_ones(batch, function, assigner,
                                                             fired_to) -> None:
    elements, fields, field = batch
    partials = ColumnarWindowPartials(fields, function, field, assigner, fired_to)
    got, expected = vectorised(partials, elements), partials.per_record(elements)
    assert same(got, expected), (got, expected)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(times, st.one_of(int_values, float_values)), min_size=1,
                max_size=40).filter(lambda rows: len({type(v) for _, v in rows}) == 1),
       st.sampled_from(FUNCTIONS), assigners)
def test_scalar_records_keyed_by_themselves_are_vectorised_too(rows, function,
                                                              assigner) -> None:
    partials = ColumnarWindowPartials((0,), function, None, assigner, -math.inf)
    assert same(vectorised(partials, rows), partials.per_record(rows))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.one_of(times, st.none(), st.just(math.nan), st.integers(0, 5)),
                          st.one_of(st.tuples(keys, st.one_of(int_values, float_values,
                                                              st.booleans(), st.none())),
                                    st.builds(lambda k: {"k": k}, keys),
                                    st.lists(keys, min_size=2, max_size=2))),
                min_size=1, max_size=20),
       st.sampled_from(FUNCTIONS), assigners)
def test_any_batch_gives_what_the_per_record_path_gives_or_raises_the_same(
        elements, function, assigner) -> None:
    partials = ColumnarWindowPartials((0,), function, 1, assigner, 0.0)
    try:
        expected: Any = partials.per_record(elements)
    except Exception as error:  # whatever it is, the same must come
        with pytest.raises(type(error)):
            partials(elements)
        return
    assert same(partials(elements), expected)


def test_float_sums_round_as_pythons_left_to_right_sum() -> None:
    elements = [(0.5, ("k", value)) for value in (1e16, 1.0, 1.0, -1e16, 0.1, 0.2)]
    partials = ColumnarWindowPartials((0,), "sum", 1, TumblingWindows(1.0), -math.inf)
    [(_, (total, _))] = partials.vectorised(elements)
    assert total == ((((1e16 + 1.0) + 1.0) - 1e16) + 0.1) + 0.2


@pytest.mark.parametrize("elements, why", [
    ([(1.0, ("k", 1)), (2.0, ["k", 1])], "tuples and lists"),
    ([(1.0, ("k", 1)), (2.0, ("k", 1.5))], "ints and floats in one field"),
    ([(1.0, (1, 1)), (2.0, (True, 1))], "1 and True, one key in Python"),
    ([(1.0, (math.nan, 1))], "a NaN key"),
    ([(1.0, ("k", 2**63))], "a value beyond int64"),
    ([(1.0, ("k", 2**62)), (1.0, ("k", 2**62))], "a sum beyond int64"),
    ([(None, ("k", 1))], "no timestamp"),
    ([(1, ("k", 1))], "an int timestamp"),
    ([(1.0, ("k", True))], "bools, summed to ints in Python"),
    ([(1.0, ("k", 0.0)), (1.0, ("k", -0.0))], "0.0 and -0.0 in a min"),
])
def test_a_batch_it_cannot_vectorise_goes_per_record(elements, why) -> None:
    function = "min" if "min" in why else "sum"
    partials = ColumnarWindowPartials((0,), function, 1, TumblingWindows(1.0), -math.inf)
    with pytest.raises(Unvectorisable):
        partials.vectorised(elements)
    if elements[0][0] is not None:
        assert same(partials(elements), partials.per_record(elements))


def window_op(function: str, key: dict[str, Any], field: Any = None,
              slide: float = 1.0) -> OperatorSpec:
    return OperatorSpec("op-1", "window", "window",
                        {"key": key, "size": 2.0, "slide": slide, "offset": 0.0,
                         "function": function, "field": field})


def test_only_declarative_windows_are_vectorised_a_key_function_over_columns() -> None:
    assigner = TumblingWindows(2.0)
    for function in FUNCTIONS:
        assert window_partials(window_op(function, {"fields": [0]}, 1), assigner, 0.0, KEY)
    by_function = window_partials(window_op("sum", {"function": True}, 1), assigner, 0.0,
                                  KEY)
    assert by_function is not None and by_function.key_function is KEY
    assert window_partials(window_op("reduce", {"fields": [0]}), assigner, 0.0, KEY) is None
    assert window_partials(window_op("aggregate", {"fields": [0]}), assigner, 0.0,
                           KEY) is None


KEY = field_key((0,))


USER_AGGREGATES = {
    "count": AggregateFunctions(lambda: 0, lambda a, r: a + 1, lambda a, b: a + b),
    "sum": AggregateFunctions(lambda: 0, lambda a, r: a + r[1], lambda a, b: a + b),
    "min": AggregateFunctions(lambda: math.inf, lambda a, r: min(a, r[1]), min),
    "max": AggregateFunctions(lambda: -math.inf, lambda a, r: max(a, r[1]), max),
    "mean": AggregateFunctions(lambda: (0, 0), lambda a, r: (a[0] + r[1], a[1] + 1),
                               lambda a, b: (a[0] + b[0], a[1] + b[1]),
                               lambda a: a[0] / a[1]),
}


def fired(state: WindowState, batches: list[list], partials: Any) -> list:
    """Each batch pre-aggregated by ``partials(batch, fired_to)`` and merged, the watermark
    moved after each; every window fired, in order."""
    out = []
    for number, batch in enumerate(batches):
        state.merge(partials(batch, state.fired_to))
        out += state.fire(number * 1.5)
    return out + state.fire(math.inf)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.floats(0, 12), st.tuples(st.sampled_from("abc"),
                                                               st.integers(-50, 50))),
                         min_size=1, max_size=30), min_size=1, max_size=5),
       st.sampled_from(FUNCTIONS), st.sampled_from([2.0, 0.5]))
def test_a_user_aggregate_the_declarative_one_and_the_vectorised_one_fire_the_same_windows(
        batches, function, slide) -> None:
    key = {"fields": [0]}
    declarative = window_op(function, key, 1, slide)
    user = window_op("aggregate", key, None, slide)
    code = UserCode(aggregate=USER_AGGREGATES[function])

    def per_record(op: OperatorSpec, code: UserCode) -> Any:
        """As the task runs a window today: a Python call per record."""
        def run(batch: list, fired_to: float) -> list:
            state = WindowState(op, code)
            contributions = WindowContributions(field_key((0,)), state.assigner,
                                                state.aggregation.contribution, fired_to)
            fold = PreAggregated(state.aggregation.merge)
            return list(fold(pair for element in batch for pair in contributions(element)))
        return run

    def vectorised(batch: list, fired_to: float) -> list:
        state = WindowState(declarative, UserCode())
        partials = window_partials(declarative, state.assigner, fired_to, KEY)
        assert partials is not None
        return partials.vectorised(batch)

    by_user = fired(WindowState(user, code), batches, per_record(user, code))
    by_declaration = fired(WindowState(declarative, UserCode()), batches,
                           per_record(declarative, UserCode()))
    by_columns = fired(WindowState(declarative, UserCode()), batches, vectorised)
    assert same(by_declaration, by_columns)
    assert [(t, (k, s, e)) for t, (k, s, e, _) in by_user] == \
        [(t, (k, s, e)) for t, (k, s, e, _) in by_columns]
    assert all(math.isclose(a[1][3], b[1][3]) for a, b in zip(by_user, by_columns,
                                                               strict=True))
