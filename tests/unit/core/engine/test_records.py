"""The record model: shapes, the exchange encoding, key strings, collected JSON."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from pyspark.sql import Row

from clusterdeck.core.engine.records import (
    RowDecoder,
    decode_record,
    encode_record,
    field_value,
    key_string,
    record_to_row,
    record_to_tuple,
    table_shape,
    to_jsonable,
)

VALUES = [
    None, True, 3, -2.5, "wörd", ("a", 1), ["a", 1], {"k": 1, 2: (3, 4)}, Row(word="x", n=2),
    b"\x00\xff", dt.date(2024, 2, 29), dt.datetime(2024, 1, 1, 12, 30, 5, 7), Decimal("1.10"),
    frozenset({1, 2}), [("nested", [1, {"deep": (None,)}])],
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_record_survives_the_exchange_encoding_with_its_types(value):
    decoded = decode_record(encode_record(value))
    assert decoded == value
    assert type(decoded) is type(value) or isinstance(value, Row | frozenset)


def test_an_object_of_another_type_cannot_cross_a_vertex_boundary():
    with pytest.raises(TypeError, match="cannot be stored between vertices"):
        encode_record(object())


@pytest.mark.parametrize("record, columns, back", [
    ("line", ["value"], "line"),
    (("w", 1), ["_1", "_2"], ("w", 1)),
    ({"w": "x", "n": 1}, ["w", "n"], Row(w="x", n=1)),
    (Row(w="x", n=1), ["w", "n"], Row(w="x", n=1)),
])
def test_a_record_shape_gives_columns_and_the_columns_give_the_record_back(record, columns,
                                                                           back):
    row = record_to_row(record)
    assert list(row.__fields__) == columns
    assert RowDecoder(table_shape(columns))(row) == back


def test_a_declared_schema_takes_the_values_by_name_or_position():
    assert record_to_tuple({"n": 1, "w": "x"}, ["w", "n"]) == ("x", 1)
    assert record_to_tuple(Row(n=1, w="x"), ["w", "n"]) == ("x", 1)
    assert record_to_tuple(("x", 1), ["a", "b"]) == ("x", 1)
    assert record_to_tuple(7, ["value"]) == (7,)


def test_fields_are_found_by_name_or_position_in_every_shape():
    assert field_value(("a", 2), 1) == 2
    assert field_value(("a", 2), "_2") == 2
    assert field_value(Row(word="a"), "word") == "a"
    assert field_value({"word": "a"}, "word") == "a"
    assert field_value("a", "value") == "a"
    assert field_value("a", 0) == "a"
    with pytest.raises(KeyError):
        field_value(("a",), "word")


@pytest.mark.parametrize("key, text", [
    ("word", "word"), (42, "42"), (True, "true"), (2.5, "2.5"), (3.0, "3.0"),
    (1e20, "1.0E20"), (1.5e-5, "1.5E-5"), (dt.date(2024, 1, 2), "2024-01-02"),
    (None, None), (("a", None, 1), "a\x01\x00\x011"),
])
def test_key_strings_are_what_spark_casts_the_same_values_to(key, text):
    assert key_string(key) == text


def test_collected_records_become_plain_json():
    record = (Row(name="x", when=dt.date(2024, 1, 2)), {1: b"\x01"}, Decimal("2.50"), {3})
    assert json.loads(json.dumps(to_jsonable(record))) == [
        {"name": "x", "when": "2024-01-02"}, {"1": "AQ=="}, "2.50", [3]]
