"""Channels over real sockets on loopback: what a producer emits arrives in order with its
events, a consumer that stops taking stops its producer after a bounded number of
buffers, and a blocked channel holds back only itself."""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clusterdeck.core.dataservice import capability, selfsigned
from clusterdeck.core.streaming.network import (
    BufferKind,
    ChannelError,
    ChannelServer,
    ChannelTimeout,
    InputGate,
    Received,
    ResultPartitionWriter,
    SubpartitionLocation,
    partition_capability,
)
from tests.waiting import wait_for

DATA, EVENT, END = BufferKind.DATA, BufferKind.EVENT, BufferKind.END_OF_PARTITION
DEADLINE = 10.0


class Network:
    """One ChannelServer and the gates of a test, all closed at its end."""

    def __init__(self, certificate: selfsigned.SelfSigned | None = None) -> None:
        self.key = capability.new_key()
        self.server = ChannelServer(self.key, certificate=certificate)
        self.address = self.server.start()
        self.gates: list[InputGate] = []
        self.threads: list[threading.Thread] = []

    def location(self, partition_id: str, subpartition: int = 0) -> SubpartitionLocation:
        return SubpartitionLocation(
            self.address.host, self.address.port, partition_id, subpartition,
            partition_capability(self.key, partition_id), self.address.fingerprint)

    def gate(self, locations: list[SubpartitionLocation], **options: object) -> InputGate:
        gate = InputGate(locations, loop=self.server.loop, **options)  # type: ignore[arg-type]
        self.gates.append(gate)
        return gate

    def in_thread(self, work: Callable[[], None]) -> list[BaseException]:
        """Run ``work`` on a thread of its own; what it raised lands in the list."""
        errors: list[BaseException] = []

        def run() -> None:
            try:
                work()
            except BaseException as error:
                errors.append(error)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)
        return errors

    def close(self) -> None:
        for gate in self.gates:
            gate.close()
        self.server.close()
        for thread in self.threads:
            thread.join(DEADLINE)


@pytest.fixture
def network() -> Iterator[Network]:
    net = Network()
    try:
        yield net
    finally:
        net.close()


def drain(gate: InputGate) -> list[Received]:
    """Everything until every channel ended."""
    received = []
    while not gate.finished:
        item = gate.poll(DEADLINE)
        assert item is not None, f"nothing came within {DEADLINE} s"
        received.append(item)
    return received


def on_channel(received: list[Received], channel: int) -> list[tuple[BufferKind, bytes]]:
    return [(r.kind, r.payload) for r in received if r.channel == channel]


def test_records_arrive_in_order_with_their_events(network: Network) -> None:
    writer = network.server.register("p", 1)
    gate = network.gate([network.location("p")])

    def produce() -> None:
        for index in range(200):
            writer.emit(0, b"record %d" % index)
            if index % 50 == 49:
                writer.broadcast_event(b"barrier %d" % (index // 50))
        writer.finish()
    errors = network.in_thread(produce)
    expected: list[tuple[BufferKind, bytes]] = []
    for index in range(200):
        expected.append((DATA, b"record %d" % index))
        if index % 50 == 49:
            expected.append((EVENT, b"barrier %d" % (index // 50)))
    assert on_channel(drain(gate), 0) == [*expected, (END, b"")]
    assert errors == []
    assert gate.poll(0.0) is None  # ended: nothing more, no waiting
    wait_for(lambda: writer.delivered, DEADLINE, "the writer to see its end delivered")


def test_a_consumer_that_stops_taking_stops_its_producer_after_a_bounded_count(
        network: Network) -> None:
    writer = network.server.register("p", 1, buffers_per_channel=8)
    gate = network.gate([network.location("p")], credits=4)
    emitted: list[int] = []

    def produce() -> None:
        for index in range(100):
            writer.emit(0, b"%d" % index, timeout=DEADLINE)
            emitted.append(index)
        writer.finish()
    errors = network.in_thread(produce)
    subpartition = writer.subpartition(0)
    wait_for(lambda: subpartition.queued() == 8 and gate.queued(0) == 4, DEADLINE,
             "both sides full")
    assert len(emitted) == 8 + 4  # the producer's queue and the consumer's credit
    with pytest.raises(ChannelTimeout, match="took nothing"):
        writer.emit(0, b"one more", timeout=0.1)
    received = drain(gate)
    assert errors == []
    assert [r.payload for r in received if r.kind is DATA] == [b"%d" % i for i in range(100)]


def test_a_blocked_channel_holds_back_only_itself(network: Network) -> None:
    writers = [network.server.register(f"p{i}", 1, buffers_per_channel=2) for i in range(2)]
    gate = network.gate([network.location("p0"), network.location("p1")], credits=2)
    gate.block(0)
    emitted = [0, 0]

    def produce(index: int) -> Callable[[], None]:
        def run() -> None:
            for record in range(30):
                writers[index].emit(0, b"%d" % record, timeout=DEADLINE)
                emitted[index] += 1
            writers[index].finish()
        return run
    errors = [network.in_thread(produce(0)), network.in_thread(produce(1))]
    taken = []
    while not gate.ended(1):
        item = gate.poll(DEADLINE)
        assert item is not None and item.channel == 1
        taken.append(item)
    assert len(taken) == 31
    wait_for(lambda: gate.queued(0) == 2 and writers[0].subpartition(0).queued() == 2,
             DEADLINE, "the blocked channel full on both sides")
    assert emitted[0] == 4
    gate.unblock(0)
    rest = drain(gate)
    assert [r.payload for r in rest if r.kind is DATA] == [b"%d" % i for i in range(30)]
    assert {r.channel for r in rest} == {0}
    assert errors == [[], []]


def test_poll_takes_turns_between_channels_with_data(network: Network) -> None:
    writers = [network.server.register(f"p{i}", 1) for i in range(3)]
    gate = network.gate([network.location(f"p{i}") for i in range(3)], credits=4)
    for writer in writers:
        for record in range(4):
            writer.emit(0, b"%d" % record)
    wait_for(lambda: all(gate.queued(i) == 4 for i in range(3)), DEADLINE,
             "four buffers on every channel")
    order = [gate.poll(DEADLINE) for _ in range(6)]
    assert [item.channel for item in order if item] == [0, 1, 2, 0, 1, 2]


def test_a_consumer_that_comes_before_the_partition_is_served_once_it_is_registered(
        network: Network) -> None:
    gate = network.gate([network.location("late")])
    assert gate.poll(0.3) is None  # asked, answered "not yet", asking again
    writer = network.server.register("late", 1)
    writer.emit(0, b"first")
    writer.finish()
    assert on_channel(drain(gate), 0) == [(DATA, b"first"), (END, b"")]


def test_a_partition_never_registered_fails_the_channel_at_its_deadline(
        network: Network) -> None:
    """Its TaskManager answered each time ("not registered"): it is not unreachable."""
    gate = network.gate([network.location("never")], connect_timeout=0.5)
    with pytest.raises(ChannelError, match=r"channel 0 .*never.*not registered") as raised:
        gate.poll(DEADLINE)
    assert raised.value.__cause__.unreachable == ()


def test_a_producer_that_takes_no_connection_is_named_unreachable_at_the_deadline(
        network: Network) -> None:
    """Nothing listens where the producer's TaskManager said it serves (a port closed,
    a peer cut off): the failure names that TaskManager for the job to block."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    location = dataclasses.replace(network.location("p"), port=port,
                                   taskmanager_id="taskmanager-7")
    gate = network.gate([location], connect_timeout=0.5)
    with pytest.raises(ChannelError, match=r"nothing served within 0\.5 s") as raised:
        gate.poll(DEADLINE)
    assert raised.value.__cause__.unreachable == ("taskmanager-7",)


def test_a_consumed_partition_is_answered_gone_not_later(network: Network) -> None:
    writer = network.server.register("once", 1)
    writer.finish()
    drain(network.gate([network.location("once")]))
    wait_for(lambda: writer.delivered, DEADLINE, "the end delivered")
    again = network.gate([network.location("once")])
    with pytest.raises(ChannelError, match="gone: it was consumed completely"):
        again.poll(DEADLINE)


def test_a_consumer_taking_smaller_buffers_than_the_partition_sends_is_refused(
        network: Network) -> None:
    network.server.register("big", 1, max_buffer_size=4096)
    gate = network.gate([network.location("big")], max_buffer_size=1024)
    with pytest.raises(ChannelError, match="buffers of up to 4096 bytes"):
        gate.poll(DEADLINE)


def test_many_producers_and_consumers_deliver_everything(network: Network) -> None:
    parallelism, records = 16, 20
    writers = [network.server.register(f"p{p}", parallelism, buffers_per_channel=2)
               for p in range(parallelism)]
    gates = [network.gate([network.location(f"p{p}", c) for p in range(parallelism)],
                          credits=2) for c in range(parallelism)]

    def produce(writer: ResultPartitionWriter) -> Callable[[], None]:
        def run() -> None:
            for record in range(records):
                for consumer in range(parallelism):
                    writer.emit(consumer, b"%s>%d:%d" % (writer.partition_id.encode(),
                                                         consumer, record), timeout=DEADLINE)
            writer.finish()
        return run
    results: list[list[Received]] = [[] for _ in gates]

    def consume(index: int) -> Callable[[], None]:
        return lambda: results[index].extend(drain(gates[index]))
    errors = [network.in_thread(produce(w)) for w in writers]
    errors += [network.in_thread(consume(c)) for c in range(parallelism)]
    for thread in network.threads:
        thread.join(30.0)
    assert all(e == [] for e in errors), errors
    for consumer, received in enumerate(results):
        for producer in range(parallelism):
            assert on_channel(received, producer) == [
                *((DATA, b"p%d>%d:%d" % (producer, consumer, r)) for r in range(records)),
                (END, b"")]


def test_tls_with_the_pinned_certificate_delivers(tmp_path: Path) -> None:
    certificate = selfsigned.make(tmp_path, "127.0.0.1")
    network = Network(certificate)
    try:
        writer = network.server.register("secret", 1)
        gate = network.gate([network.location("secret")])
        writer.emit(0, b"x" * 100_000)
        writer.finish()
        assert on_channel(drain(gate), 0) == [(DATA, b"x" * 100_000), (END, b"")]
        other = selfsigned.make(tmp_path / "other", "127.0.0.1")
        network.server.register("spoofed", 1)
        wrong = SubpartitionLocation(network.address.host, network.address.port, "spoofed",
                                     0, partition_capability(network.key, "spoofed"),
                                     other.fingerprint)
        with pytest.raises(ChannelError, match="certificate other than"):
            network.gate([wrong]).poll(DEADLINE)
    finally:
        network.close()
