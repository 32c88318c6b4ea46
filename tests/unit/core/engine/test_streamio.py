"""A streaming task's exchanges over real channels on loopback: keyed records reach the
consumer that owns their key, barriers align across producers, the input watermark is
the smallest of the inputs', the end of every input ends the gate, and what a peer sends
that is not records or an event fails the task naming the channel."""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

from clusterdeck.core.checkpointing.alignment import TakeSnapshot
from clusterdeck.core.dataservice.capability import new_key
from clusterdeck.core.engine.streamio import (
    GateInput,
    PartitionOutput,
    Polled,
    subpartition_of,
)
from clusterdeck.core.protocol.checkpoints import CheckpointingMode
from clusterdeck.core.protocol.wiring import StreamChannel
from clusterdeck.core.streaming.network import ChannelError, ChannelServer, partition_capability
from clusterdeck.core.streaming.network.frames import (
    PRODUCER_KINDS,
    ErrorFrame,
    FrameDecoder,
    Hello,
    encode,
)

EXACTLY_ONCE = CheckpointingMode.EXACTLY_ONCE


def ipc_stream(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


class Exchange:
    def __init__(self) -> None:
        self.server = ChannelServer(new_key())
        self.address = self.server.start()
        self.gates: list[GateInput] = []

    def output(self, partition_id: str, consumers: int,
               key_of: Callable | None = None) -> PartitionOutput:
        return PartitionOutput(self.server, partition_id, consumers, key_of, lambda: False)

    def input(self, *sources: tuple[str, int]) -> GateInput:
        gate = GateInput([StreamChannel(self.address.host, self.address.port, "", partition,
                                        subpartition,
                                        partition_capability(self.server.key, partition))
                          for partition, subpartition in sources], EXACTLY_ONCE)
        self.gates.append(gate)
        return gate

    def close(self) -> None:
        for gate in self.gates:
            gate.close()
        self.server.close()


@pytest.fixture
def exchange() -> Iterator[Exchange]:
    made = Exchange()
    yield made
    made.close()


def collect(gate: GateInput, until: Callable[[Polled], bool], limit: int = 100) -> Polled:
    """Polls merged until ``until(total)`` holds (each poll waits at most a second)."""
    total = Polled()
    for _ in range(200):
        polled = gate.poll(1.0, limit)
        total.elements += polled.elements
        total.actions += polled.actions
        total.watermark = polled.watermark if polled.watermark is not None \
            else total.watermark
        total.ended = polled.ended
        if until(total):
            return total
    raise AssertionError(f"not reached: {total}")


def test_a_keyed_record_reaches_the_consumer_that_owns_its_key(exchange) -> None:
    out = exchange.output("p0", 2, key_of=lambda record: record[1])
    records = [(float(i), (i, f"key-{i % 5}")) for i in range(50)]
    gates = [exchange.input(("p0", 0)), exchange.input(("p0", 1))]
    out.emit(records)
    out.finish()
    got = [collect(gate, lambda total: total.ended).elements for gate in gates]
    assert sorted(got[0] + got[1]) == records  # tuples come back as tuples
    for index, elements in enumerate(got):
        assert {subpartition_of(record[1], 2) for _, record in elements} == {index}


def test_records_of_any_shape_cross_in_order(exchange) -> None:
    out = exchange.output("p0", 1)
    records = [(float(i), (i, f"k{i}", i / 3)) for i in range(5000)] + [
        (None, {"nested": [1, (2, 3)]}), (1.5, "text"), (2.5, 2**80)]
    gate = exchange.input(("p0", 0))
    out.emit(records)
    out.finish()
    assert collect(gate, lambda total: total.ended, limit=10_000).elements == records


def test_the_subpartition_of_a_key_is_the_same_in_every_process() -> None:
    assert [subpartition_of(f"key-{i}", 4) for i in range(6)] == [
        subpartition_of(f"key-{i}", 4) for i in range(6)]
    assert subpartition_of("key-1", 4) == 2  # a fixed value: BLAKE2b, not hash()


def test_records_before_a_barrier_come_first_and_the_snapshot_waits_for_every_input(
        exchange) -> None:
    left, right = exchange.output("left", 1), exchange.output("right", 1)
    gate = exchange.input(("left", 0), ("right", 0))
    left.emit([(None, "l1")])
    left.barrier(1)
    left.emit([(None, "l2")])  # after the barrier: held back until the right aligned
    seen: list = []
    for _ in range(5):  # half a second: l2 would be here by then were it not held back
        seen += gate.poll(0.1, 10).elements
    assert seen == [(None, "l1")]
    right.emit([(None, "r1")])
    right.barrier(1)
    aligned = collect(gate, lambda total: any(isinstance(a, TakeSnapshot)
                                              for a in total.actions))
    assert aligned.elements == [(None, "r1")]  # l2 is not among what came before it
    assert [a.checkpoint_id for a in aligned.actions] == [1]
    after = collect(gate, lambda total: total.elements)
    assert after.elements == [(None, "l2")]


def test_the_input_watermark_is_the_smallest_and_ends_at_infinity(exchange) -> None:
    left, right = exchange.output("left", 1), exchange.output("right", 1)
    gate = exchange.input(("left", 0), ("right", 0))
    left.watermark(10.0)
    right.watermark(4.0)
    assert collect(gate, lambda total: total.watermark == 4.0).watermark == 4.0
    right.watermark(math.inf)
    assert collect(gate, lambda total: total.watermark == 10.0).watermark == 10.0
    left.finish()
    right.finish()
    ended = collect(gate, lambda total: total.ended)
    assert ended.ended and gate.poll(0.0, 10).ended


@pytest.mark.parametrize("payload, what", [
    (b"{not json", "a buffer that is not records"),
    (b'{"records": 1}', "a buffer that is not records"),
    (b'[[1.0]]', "a buffer that is not records"),
    (b'[["soon", "1"]]', "a buffer that is not records"),
    (b'[[1.0, "{\\"t\\":[1]}"]]', "a buffer that is not records"),  # the JSON of protocol 2
    (ipc_stream(pa.record_batch([pa.array([1.0]), pa.array([1], pa.int32())],
                                names=["timestamp", "_1"])), "a buffer that is not records"),
])
def test_a_buffer_that_is_not_records_fails_the_input_naming_its_channel(
        exchange, payload, what) -> None:
    out = exchange.output("bad", 1)
    gate = exchange.input(("bad", 0))
    out.writer.emit(0, payload)
    named = f"input channel 0 \\(bad, subpartition 0\\) sent {what}"
    with pytest.raises(ChannelError, match=named):
        collect(gate, lambda total: False)


def test_a_consumer_of_frame_protocol_2_is_refused_naming_both_versions(exchange) -> None:
    """Protocol 2 sent JSON buffers: a peer of that version must fail at its hello, not
    at its first buffer."""
    exchange.output("p", 1)
    hello = Hello("p", 0, partition_capability(exchange.server.key, "p"), 1 << 20, version=2)
    with socket.create_connection((exchange.address.host, exchange.address.port), 10) as sock:
        sock.settimeout(10)
        sock.sendall(encode(hello))
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    (answer,) = FrameDecoder(4096, PRODUCER_KINDS).feed(received)
    assert isinstance(answer, ErrorFrame)
    assert "protocol version 2 asked, this TaskManager speaks 3" in answer.reason


@pytest.mark.parametrize("event", [
    {"barrier": 0}, {"barrier": True}, {"watermark": "soon"}, {"watermark": None},
    {"barrier": 1, "cancel": 1}, {"nothing": 1}, [1],
])
def test_an_event_that_is_not_one_fails_the_input(exchange, event) -> None:
    out = exchange.output("bad", 1)
    gate = exchange.input(("bad", 0))
    out.writer.broadcast_event(json.dumps(event).encode())
    with pytest.raises(ChannelError, match="sent an event that is not one"):
        collect(gate, lambda total: False)


def test_a_non_finite_watermark_is_refused(exchange) -> None:
    out = exchange.output("bad", 1)
    gate = exchange.input(("bad", 0))
    out.writer.broadcast_event(b'{"watermark": NaN}')
    with pytest.raises(ChannelError, match="not one"):
        collect(gate, lambda total: False)


class StuckWriter:
    """A subpartition writer whose consumer takes nothing until told to."""

    subpartitions = 1

    def __init__(self) -> None:
        self.sending, self.taken = threading.Event(), threading.Event()

    def emit(self, index: int, payload: bytes, timeout: float) -> None:
        self.sending.set()
        self.taken.wait(timeout)


class OneWriterServer:
    def __init__(self, writer: StuckWriter) -> None:
        self.writer = writer

    def register(self, partition_id: str, subpartitions: int, cancelled) -> StuckWriter:
        return self.writer


def test_backpressure_counts_a_wait_while_it_goes_on_and_stops_with_it() -> None:
    """The live numbers read it from another thread: a wait of many seconds must show
    while it lasts, not only once it ended."""
    writer = StuckWriter()
    output = PartitionOutput(OneWriterServer(writer), "p", 1, None, lambda: False)
    assert output.backpressured == 0.0
    sending = threading.Thread(target=output.emit, args=([(None, "record")],))
    sending.start()
    assert writer.sending.wait(10)
    first, deadline = output.backpressured, time.monotonic() + 10
    while output.backpressured <= first + 0.02 and time.monotonic() < deadline:
        writer.taken.wait(0.005)  # a moment of the slot thread still waiting
    during = output.backpressured
    writer.taken.set()
    sending.join(10)

    done = output.backpressured
    assert first < during <= done
    assert output.backpressured == done  # the wait is over: it grows no more


def test_inputs_that_end_without_the_end_of_event_time_fire_nothing(exchange) -> None:
    """A stopped source ends its output without a watermark of infinity: the end of every
    input must not fire the open windows (they would come after its last checkpoint)."""
    left, right = exchange.output("left", 1), exchange.output("right", 1)
    gate = exchange.input(("left", 0), ("right", 0))
    left.watermark(3.0)
    right.watermark(5.0)
    assert collect(gate, lambda total: total.watermark == 3.0).watermark == 3.0
    left.finish()  # the other input alone holds the watermark now: it moves on to 5
    assert collect(gate, lambda total: total.watermark == 5.0).watermark == 5.0
    right.finish()
    ended = collect(gate, lambda total: total.ended)
    assert ended.watermark is None


def test_a_poll_tells_how_long_it_waited_for_buffers_also_while_a_batch_gathers(
        exchange) -> None:
    """The busy share (taskmanager/metrics.py): a task lingering for more records after
    its first one is waiting, not working."""
    out = exchange.output("p0", 1)
    gate = exchange.input(("p0", 0))
    out.emit([(None, 1)])
    collect(gate, lambda total: bool(total.elements))  # connected, one record
    out.emit([(None, 2)])
    polled = gate.poll(1.0, 100, linger=0.3)  # the record, then 0.3 s for more
    assert [record for _, record in polled.elements] == [2]
    assert 0.25 < polled.waited < 1.0
