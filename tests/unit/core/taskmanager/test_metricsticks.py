"""When a TaskManager's live numbers go out (core/taskmanager/metricsticks.py)."""

from __future__ import annotations

import threading
from typing import Any

from clusterdeck.core.protocol import topics
from clusterdeck.core.taskmanager.metrics import IDLE_INTERVAL, INTERVAL
from clusterdeck.core.taskmanager.metricsticks import MetricsTicks
from tests.unit.core.taskmanager.helpers import FakeEndpoint
from tests.unit.core.taskmanager.test_metrics import task
from tests.waiting import wait_for


def test_an_attempt_that_begins_while_idle_has_its_numbers_out_at_once() -> None:
    endpoint, running = FakeEndpoint(), []
    ticks = MetricsTicks(endpoint, "tm-1", lambda: running, lambda: None)
    ticks.start()
    assert [delay for delay, _fn, _args in endpoint.timers] == [IDLE_INTERVAL]
    assert endpoint.rpc_service.published == []  # nothing to say yet

    began = task("a-1")
    running.append(began)
    ticks.began(began)  # type: ignore[arg-type]

    (topic, message), = endpoint.rpc_service.published
    assert topic == topics.metrics("tm-1")
    assert [a.attempt_id for a in message.attempts] == ["a-1"]
    assert [delay for delay, _fn, _args in endpoint.timers] == [IDLE_INTERVAL, INTERVAL]
    endpoint.fire_timers()  # the idle chain's tick does nothing: a newer chain runs
    assert len(endpoint.rpc_service.published) == 2
    assert [delay for delay, _fn, _args in endpoint.timers] == [INTERVAL]
    ticks.stop()


def test_a_heap_that_cannot_be_read_shows_as_unknown() -> None:
    endpoint = FakeEndpoint()
    read = threading.Event()

    class Unanswering:
        @property
        def sparkContext(self) -> Any:
            read.set()
            raise ConnectionError("the JVM does not answer")

    ticks = MetricsTicks(endpoint, "tm-1", lambda: [], Unanswering)
    ticks.numbers.heap = (1, 2)
    ticks.start()
    wait_for(lambda: read.is_set() and endpoint.mailbox, 10, "the heap read on its worker")
    endpoint.drain()
    assert ticks.numbers.heap == (-1, -1)
    ticks.stop()
