"""The MQTT sink's logic with a stand-in connection (core/streaming/mqttsink.py): a message
per line, bounded in flight, and a checkpoint only once the broker acknowledged all."""

from __future__ import annotations

import pytest

from clusterdeck.core.streaming.mqttsink import MqttSink, MqttSinkError


class Message:
    def __init__(self, acked: bool) -> None:
        self.acked = acked
        self.waited = False

    def done(self) -> bool:
        return self.acked

    def wait(self, timeout: float) -> bool:
        self.waited = True
        return self.acked


class Broker:
    """Publishes; acknowledges each message when ``acks`` says so (default: at once)."""

    def __init__(self, acks: bool = True) -> None:
        self.acks = acks
        self.sent: list[tuple[str, bytes, int, bool]] = []
        self.messages: list[Message] = []

    def publish(self, topic: str, payload: bytes, qos: int, retain: bool) -> Message:
        self.sent.append((topic, payload, qos, retain))
        self.messages.append(Message(self.acks))
        return self.messages[-1]


def test_each_line_is_one_utf8_message_on_the_topic():
    broker = Broker()
    sink = MqttSink(broker, "out/t", qos=1, retain=True)
    sink.write(["a", "é"])
    assert broker.sent == [("out/t", b"a", 1, True), ("out/t", "é".encode(), 1, True)]
    assert sink.published == 2


def test_a_snapshot_waits_for_every_acknowledgement():
    broker = Broker()
    sink = MqttSink(broker, "t")
    sink.write(["a", "b"])
    assert sink.snapshot(1) == {"published": 2}
    assert sink.inflight == 0


def test_a_message_never_acknowledged_declines_the_checkpoint():
    broker = Broker(acks=False)
    sink = MqttSink(broker, "t", timeout=0.01)
    sink.write(["a"])
    with pytest.raises(MqttSinkError, match="did not acknowledge"):
        sink.snapshot(1)


def test_a_write_waits_for_the_oldest_message_beyond_the_in_flight_bound():
    broker = Broker(acks=False)
    sink = MqttSink(broker, "t", max_inflight=2, timeout=0.01)
    sink.write(["a", "b"])
    assert sink.inflight == 2
    broker.messages[0].acked = True
    sink.write(["c"])  # the first is done: room for one more
    assert sink.inflight == 2
    with pytest.raises(MqttSinkError):
        sink.write(["d"])  # the second never is
    assert broker.messages[1].waited


def test_qos_0_messages_are_not_waited_for():
    broker = Broker(acks=False)
    sink = MqttSink(broker, "t", qos=0, max_inflight=1)
    sink.write(["a", "b", "c"])
    assert sink.snapshot(1) == {"published": 3}


def test_an_oversized_record_fails_the_write_rather_than_vanishing():
    sink = MqttSink(Broker(), "t", max_payload=3)
    with pytest.raises(MqttSinkError, match="4 bytes"):
        sink.write(["abcd"])
