"""Channels that fail: each failure reaches the side that uses it as a ChannelError naming
the channel, and the server cuts off a hostile peer while it goes on serving the others."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest

from clusterdeck.core.dataservice import capability
from clusterdeck.core.streaming.network import (
    BufferKind,
    ChannelError,
    ChannelServer,
    InputGate,
    SubpartitionLocation,
    frames,
    partition_capability,
)
from clusterdeck.core.streaming.network.frames import (
    DataBuffer,
    ErrorFrame,
    FrameDecoder,
    FrameKind,
    Hello,
)
from tests.waiting import wait_for

DEADLINE = 10.0


class Served:
    """A ChannelServer with small bounds, and what a test opened on it."""

    def __init__(self, **options: object) -> None:
        self.key = capability.new_key()
        self.server = ChannelServer(self.key, **options)  # type: ignore[arg-type]
        self.address = self.server.start()
        self.gates: list[InputGate] = []
        self.sockets: list[socket.socket] = []

    def location(self, partition_id: str, presented: str | None = None,
                 taskmanager_id: str = "") -> SubpartitionLocation:
        return SubpartitionLocation(
            self.address.host, self.address.port, partition_id, 0,
            presented or partition_capability(self.key, partition_id),
            taskmanager_id=taskmanager_id)

    def gate(self, *locations: SubpartitionLocation, **options: object) -> InputGate:
        gate = InputGate(list(locations), **options)  # type: ignore[arg-type]
        self.gates.append(gate)
        return gate

    def raw(self) -> socket.socket:
        sock = socket.create_connection((self.address.host, self.address.port), DEADLINE)
        sock.settimeout(DEADLINE)
        self.sockets.append(sock)
        return sock

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        for gate in self.gates:
            gate.close()
        self.server.close()

    def serves_a_good_client(self, partition_id: str) -> None:
        writer = self.server.register(partition_id, 1)
        gate = self.gate(self.location(partition_id))
        writer.emit(0, b"still serving")
        writer.finish()
        first = gate.poll(DEADLINE)
        assert first is not None and first.payload == b"still serving"


@pytest.fixture
def served() -> Iterator[Served]:
    serving = Served(hello_timeout=0.5, max_connections=3)
    try:
        yield serving
    finally:
        serving.close()


def answer_then_close(sock: socket.socket) -> list[frames.Frame]:
    """What the server sent until it closed the connection."""
    data = b""
    while chunk := _recv(sock):
        data += chunk
    return FrameDecoder(4096, frames.PRODUCER_KINDS).feed(data)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""


def test_a_wrong_capability_is_refused_and_the_next_client_served(served: Served) -> None:
    served.server.register("p", 1)
    gate = served.gate(served.location("p", presented=partition_capability(
        capability.new_key(), "p")))
    with pytest.raises(ChannelError, match=r"channel 0 .*no capability for partition p"):
        gate.poll(DEADLINE)
    served.serves_a_good_client("q")


def test_garbage_is_answered_with_an_error_and_cut_off(served: Served) -> None:
    sock = served.raw()
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    (answer,) = answer_then_close(sock)
    assert isinstance(answer, ErrorFrame) and "malformed frame" in answer.reason
    served.serves_a_good_client("p")


def test_an_oversized_length_is_cut_off_before_its_body(served: Served) -> None:
    sock = served.raw()
    sock.sendall(struct.pack("!IB", 1 << 30, FrameKind.HELLO))
    (answer,) = answer_then_close(sock)
    assert isinstance(answer, ErrorFrame) and "1073741824 bytes" in answer.reason
    served.serves_a_good_client("p")


def test_a_slow_hello_is_cut_off_at_its_deadline(served: Served) -> None:
    sock = served.raw()
    sock.sendall(frames.encode(Hello("p", 0, "ab" * 32, 1 << 20))[:7])  # and no more
    (answer,) = answer_then_close(sock)
    assert isinstance(answer, ErrorFrame) and "no hello within 0.5 s" in answer.reason
    served.serves_a_good_client("p")


def test_connections_beyond_the_bound_are_dropped_and_the_slots_come_back(
        served: Served) -> None:
    idle = [served.raw() for _ in range(3)]
    wait_for(lambda: served.server.connections == 3, DEADLINE, "three connections")
    assert answer_then_close(served.raw()) == []  # dropped at once, no answer
    for sock in idle:
        sock.close()
    wait_for(lambda: served.server.connections == 0, DEADLINE, "the idle ones gone")
    served.serves_a_good_client("p")


def test_a_second_consumer_of_a_subpartition_is_refused(served: Served) -> None:
    served.server.register("p", 1)
    served.gate(served.location("p"))
    wait_for(lambda: served.server.connections == 1, DEADLINE, "the first consumer")
    second = served.gate(served.location("p"))
    with pytest.raises(ChannelError, match="already being consumed"):
        second.poll(DEADLINE)


def test_the_producer_side_closing_mid_stream_fails_the_consumers_poll() -> None:
    producer = Served()
    consumer_side = Served()
    try:
        writer = producer.server.register("p", 1)
        gate = consumer_side.gate(consumer_side.location("other"),
                                  producer.location("p", taskmanager_id="taskmanager-7"))
        writer.emit(0, b"before")
        wait_for(lambda: gate.queued(1) == 1, DEADLINE, "the first buffer")
        producer.server.close()
        with pytest.raises(ChannelError, match=r"channel 1 \(subpartition 0 of partition p") \
                as failed:
            while True:
                assert gate.poll(DEADLINE) is not None
        # the consumer's failure names the TaskManager most likely to blame
        assert "on taskmanager-7)" in str(failed.value), str(failed.value)
    finally:
        producer.close()
        consumer_side.close()


def test_a_consumer_gone_fails_the_producers_emit(served: Served) -> None:
    writer = served.server.register("p", 2)
    gate = served.gate(replace(served.location("p"), consumer="taskmanager-2"))
    writer.emit(0, b"taken")
    assert gate.poll(DEADLINE) is not None
    gate.close()
    # named: after kill -9 of the consumer's TaskManager this failure may come first
    with pytest.raises(ChannelError, match=r"consumer of subpartition 0 of partition p on "
                                           r"taskmanager-2 .* went away.*was taskmanager-2 "
                                           r"lost\?"):
        for _ in range(100):
            writer.emit(0, b"nobody takes this", timeout=DEADLINE)
    with pytest.raises(ChannelError, match="went away"):  # the whole partition failed
        writer.emit(1, b"nor this", timeout=DEADLINE)


def test_releasing_a_partition_tells_its_consumer_why(served: Served) -> None:
    writer = served.server.register("p", 1)
    gate = served.gate(served.location("p"))
    wait_for(lambda: served.server.connections == 1, DEADLINE, "the consumer")
    writer.release("the task was cancelled")
    with pytest.raises(ChannelError, match="released: the task was cancelled"):
        gate.poll(DEADLINE)


def test_a_producer_vanishing_mid_partition_is_named_as_the_likely_cause() -> None:
    """As after kill -9 of its TaskManager: no reason, no end of partition, just gone."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(DEADLINE)

    def vanish() -> None:
        connection, _ = listener.accept()
        connection.recv(4096)  # the hello and its credit
        connection.sendall(frames.encode(DataBuffer(b"x")))
        connection.close()
    threading.Thread(target=vanish, daemon=True).start()
    gate = InputGate([SubpartitionLocation("127.0.0.1", listener.getsockname()[1], "p", 0,
                                           "ab" * 32, taskmanager_id="taskmanager-3")])
    try:
        with pytest.raises(ChannelError) as failed:
            while True:  # the buffer sent first may come before the failure or not
                assert gate.poll(DEADLINE) is not None
        message = str(failed.value)  # closed or reset, as the kernel has it
        assert "on taskmanager-3): the connection to the producer's TaskManager taskmanager-3 " \
            "was lost before the end of partition (" in message, message
        assert message.endswith("): was it lost?"), message
    finally:
        gate.close()
        listener.close()


def test_a_producer_that_sends_beyond_the_credit_fails_the_channel() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(DEADLINE)
    port = listener.getsockname()[1]

    def flood() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(4096)  # the hello and its credit
            connection.sendall(frames.encode(DataBuffer(b"x")) * 10)
            connection.recv(4096)  # until the consumer hangs up
    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    gate = InputGate([SubpartitionLocation("127.0.0.1", port, "p", 0, "ab" * 32)], credits=2)
    try:
        with pytest.raises(ChannelError, match="without credit"):
            while True:
                item = gate.poll(DEADLINE)
                assert item is not None and item.kind is BufferKind.DATA
    finally:
        gate.close()
        thread.join(DEADLINE)
        listener.close()


def test_a_producer_sending_an_oversized_frame_fails_the_channel() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(DEADLINE)
    port = listener.getsockname()[1]

    def oversized() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(4096)
            connection.sendall(struct.pack("!IB", 1 << 30, FrameKind.BUFFER))
            connection.recv(4096)
    thread = threading.Thread(target=oversized, daemon=True)
    thread.start()
    gate = InputGate([SubpartitionLocation("127.0.0.1", port, "p", 0, "ab" * 32)])
    try:
        with pytest.raises(ChannelError, match="malformed frame from the producer"):
            gate.poll(DEADLINE)
    finally:
        gate.close()
        thread.join(DEADLINE)
        listener.close()


def test_a_closed_gate_refuses_polls() -> None:
    gate = InputGate([SubpartitionLocation("127.0.0.1", 9, "p", 0, "ab" * 32)],
                     connect_timeout=DEADLINE)
    gate.close()
    with pytest.raises(ChannelError, match="closed"):
        gate.poll(0.1)
