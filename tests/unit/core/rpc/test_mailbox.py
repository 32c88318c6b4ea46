"""Who runs an endpoint's mailbox: its own thread, or a transport's thread that delivers
to it while it is idle; one of them at a time, in the order things arrived."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from clusterdeck.core.rpc import RpcEndpoint
from clusterdeck.core.rpc._endpoint import INLINE_ITEMS, Invocation, transport_thread
from tests.waiting import wait_for


class Probe(RpcEndpoint):
    """Notes which thread ran each item and whether it was its main thread then."""

    def __init__(self) -> None:
        super().__init__("probe")
        self.ran: list[tuple[str, threading.Thread, bool]] = []
        self.busy = 0  # items running at this moment: never above one

    def note(self, what: str, hold: threading.Event | None = None) -> None:
        self.busy += 1
        assert self.busy == 1, "two threads ran the mailbox at once"
        if hold is not None:
            hold.wait(10)
        self.ran.append((what, threading.current_thread(), self.is_main_thread()))
        self.busy -= 1

    def on_start(self) -> None:
        self.note("start")

    def on_stop(self) -> None:
        self.note("stop")

    def names(self) -> list[str]:
        return [what for what, _, _ in self.ran]


class FakeService:
    """Just what an endpoint asks of its service here: nothing."""


@pytest.fixture
def probe() -> Iterator[Probe]:
    endpoint = Probe()
    endpoint._start(FakeService())  # type: ignore[arg-type]
    wait_for(lambda: endpoint.names() == ["start"], 5, "on_start")
    yield endpoint
    endpoint.stop().result(5)


def deliver_from_transport(probe: Probe, *items: tuple[Any, ...]) -> threading.Thread:
    """A stand-in for paho's network thread, putting ``items`` in the mailbox."""
    def transport() -> None:
        with transport_thread():
            for fn, *args in items:
                probe.run_async(fn, *args)
    thread = threading.Thread(target=transport, name="transport")
    thread.start()
    thread.join(10)
    return thread


def test_an_idle_endpoint_runs_a_delivery_on_the_transports_thread_as_its_main(probe):
    thread = deliver_from_transport(probe, (probe.note, "a"), (probe.note, "b"))

    assert [(what, by, main) for what, by, main in probe.ran[1:]] == [
        ("a", thread, True), ("b", thread, True)]
    assert not probe.is_main_thread()  # off it again once the delivery is done


def test_a_busy_endpoint_gets_the_delivery_in_order_on_its_own_thread(probe):
    hold = threading.Event()
    probe.run_async(probe.note, "long", hold)
    wait_for(lambda: probe.busy == 1, 5, "the long item running")

    transport = threading.Thread(target=deliver_from_transport,
                                 args=(probe, (probe.note, "a"), (probe.note, "b")))
    transport.start()
    transport.join(10)
    hold.set()
    wait_for(lambda: len(probe.ran) == 4, 5, "all of it")

    assert probe.names() == ["start", "long", "a", "b"]
    assert all(by is probe._thread and main for _, by, main in probe.ran)


def test_a_transports_thread_hands_the_rest_over_after_its_share(probe):
    count = INLINE_ITEMS + 10

    def flood() -> None:  # a handler that queues many items: they are behind it
        for i in range(count):
            probe.run_async(probe.note, f"item-{i}")
    thread = deliver_from_transport(probe, (flood,))
    wait_for(lambda: len(probe.ran) == count + 1, 5, "every item")

    assert probe.names()[1:] == [f"item-{i}" for i in range(count)]
    by = [runner for _, runner, _ in probe.ran[1:]]
    assert by[:INLINE_ITEMS - 1] == [thread] * (INLINE_ITEMS - 1)
    assert by[-1] is probe._thread


def test_the_stop_runs_on_the_endpoints_own_thread_after_what_came_first():
    endpoint = Probe()
    endpoint._start(FakeService())  # type: ignore[arg-type]
    wait_for(lambda: endpoint.names() == ["start"], 5, "on_start")

    deliver_from_transport(endpoint, (endpoint.note, "a"), (endpoint.stop,),
                           (endpoint.note, "after"))
    endpoint.terminated.result(5)

    assert endpoint.names() == ["start", "a", "stop"]
    assert endpoint.ran[-1][1] is endpoint._thread


def test_on_start_runs_on_the_endpoints_own_thread_before_any_delivery(monkeypatch):
    endpoint = Probe()
    thread = endpoint._thread
    monkeypatch.setattr(thread, "start", lambda: None)  # started below, after a delivery
    endpoint._start(FakeService())  # type: ignore[arg-type]
    with transport_thread():
        endpoint._deliver(Invocation(object(), "someone"))  # a message nobody handles
    endpoint.run_async(endpoint.note, "a")
    assert endpoint.ran == [] and len(endpoint._mailbox) == 3

    monkeypatch.undo()
    thread.start()
    wait_for(lambda: len(endpoint.ran) == 2, 5, "on_start, then the rest")
    assert [(what, by) for what, by, _ in endpoint.ran] == [("start", thread), ("a", thread)]
    endpoint.stop().result(5)


def test_a_subclass_may_not_redefine_the_mailbox_machinery():
    with pytest.raises(TypeError, match="redefines _rpc_on_start"):
        type("Clumsy", (RpcEndpoint,), {"_rpc_on_start": lambda self, task: None})
