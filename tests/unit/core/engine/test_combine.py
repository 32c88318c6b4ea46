"""Keyed folds: a producer's partial results and raw records fold to the same answer."""

from __future__ import annotations

import operator
from collections import Counter

import pytest

from clusterdeck.core.engine import combine
from clusterdeck.core.engine.combine import KeyedFold
from clusterdeck.core.engine.records import FieldKey, Partial, decode_record, encode_record

WORDS = ["a", "b", "a", "c", "b", "a", "d", "a"]


def counts(fold: KeyedFold, records: list) -> dict:
    totals: dict = {}
    for record in records:
        key, value = fold.pair(record)
        totals[key] = fold.merge(totals[key], value) if key in totals else value
    return totals


def test_a_combined_partition_sends_one_partial_per_key() -> None:
    fold = KeyedFold(FieldKey([0]), lambda r: r[1], operator.add)
    combined = list(fold.combine((w, 1) for w in WORDS))
    assert sorted(combined, key=lambda p: p.key) == [
        Partial("a", 4), Partial("b", 2), Partial("c", 1), Partial("d", 1)]


def test_partials_and_raw_records_fold_to_the_same_totals() -> None:
    fold = KeyedFold(FieldKey([0]), lambda r: r[1], operator.add)
    raw = [(w, 1) for w in WORDS]
    mixed = list(fold.combine(raw[:5])) + raw[5:]  # one producer combined, one did not
    assert counts(fold, mixed) == counts(fold, raw) == dict(Counter(WORDS))


def test_memory_stays_bounded_by_sending_early(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(combine, "HELD_KEYS", 2)
    fold = KeyedFold(lambda r: r, lambda r: 1, operator.add)
    combined = list(fold.combine(WORDS))
    assert len(combined) > 4  # some keys were sent more than once
    assert counts(fold, combined) == dict(Counter(WORDS))


def test_a_record_with_an_unhashable_key_passes_unchanged() -> None:
    fold = KeyedFold(lambda r: r["tags"], lambda r: 1, operator.add)
    record = {"tags": ["x", "y"]}
    assert list(fold.combine([record])) == [record]


def test_a_reduce_folds_whole_records() -> None:
    def older(a: dict, b: dict) -> dict:
        return a if a["age"] >= b["age"] else b

    fold = KeyedFold(lambda r: r["city"], lambda r: r, older)
    people = [{"city": "Oslo", "age": 30}, {"city": "Oslo", "age": 41}, {"city": "Lima", "age": 7}]
    combined = list(fold.combine(people))
    assert counts(fold, combined) == {"Oslo": people[1], "Lima": people[2]}


def test_a_partial_survives_the_exchange_encoding() -> None:
    partial = Partial(("a", 1), {"n": 3, "when": (1, 2)})
    assert decode_record(encode_record(partial)) == partial
