"""User counters: bound to one attempt's accumulators when shipped to Spark's workers."""

from __future__ import annotations

import pickle

from clusterdeck.core.jobapi.counters import Counter, CounterScope


class FakeAccumulator:
    total = 0

    def add(self, amount):
        FakeAccumulator.total += amount


class FakeSparkContext:
    def accumulator(self, zero):
        return FakeAccumulator()


def test_a_counter_pickled_inside_a_scope_adds_to_that_scopes_accumulator():
    counter = Counter("lines")
    with CounterScope(FakeSparkContext(), ("lines",)):
        shipped = pickle.loads(pickle.dumps(counter))
    shipped.add(3)
    assert FakeAccumulator.total == 3
    assert counter.value == 0
    unbound = pickle.loads(pickle.dumps(counter))
    unbound.add(1)
    assert unbound.value == 1 and FakeAccumulator.total == 3
