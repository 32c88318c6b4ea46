"""The MQTT source's logic without a broker (core/streaming/mqttsource.py): records from
payloads, the bound on what waits, and acknowledgements only for what a completed
checkpoint covers, on the connection that delivered it."""

from __future__ import annotations

import json
import logging

from clusterdeck.core.streaming.mqttsource import Ack, MqttIntake, Received


def message(mid: int, payload: bytes | str, session: int = 1, qos: int = 1) -> Received:
    data = payload.encode() if isinstance(payload, str) else payload
    return Received(mid, qos, session, data)


def test_text_records_are_the_payloads_in_the_order_they_came():
    intake = MqttIntake()
    for mid in range(1, 4):
        intake.offer(message(mid, f"m{mid}"))
    assert intake.poll(2) == ["m1", "m2"]
    assert intake.poll(10) == ["m3"]
    assert intake.poll(10) == []


def test_bytes_that_are_not_utf8_become_replacement_characters():
    intake = MqttIntake()
    intake.offer(message(1, b"a\xffb"))
    assert intake.poll(1) == ["a\ufffdb"]


def test_json_records_are_decoded_and_undecodable_ones_dropped_counted_and_acked(caplog):
    intake = MqttIntake("json")
    intake.offer(message(1, json.dumps({"t": 1})))
    intake.offer(message(2, "not json"))
    with caplog.at_level(logging.WARNING):
        assert intake.poll(10) == [{"t": 1}]
    assert intake.dropped == 1 and "not JSON" in caplog.text
    intake.snapshot(1)
    assert intake.completed(1, session=1) == [Ack(1, 1, 1), Ack(2, 1, 1)]


def test_an_oversized_payload_is_dropped_and_counted_but_acknowledged():
    intake = MqttIntake(max_payload=4)
    intake.offer(message(1, "12345"))
    intake.offer(message(2, "1234"))
    assert intake.poll(10) == ["1234"]
    assert intake.dropped == 1
    intake.snapshot(7)
    assert [ack.message_id for ack in intake.completed(7, 1)] == [1, 2]


def test_nothing_is_acknowledged_before_a_checkpoint_that_covers_it_completed():
    intake = MqttIntake()
    intake.offer(message(1, "a"))
    intake.offer(message(2, "b"))
    intake.poll(1)
    intake.snapshot(1)          # covers message 1
    intake.poll(1)              # message 2: after checkpoint 1's barrier
    assert intake.completed(0, 1) == []
    assert intake.unacknowledged == 2
    assert intake.completed(1, 1) == [Ack(1, 1, 1)]
    assert intake.completed(1, 1) == []  # once only
    intake.snapshot(2)
    assert intake.completed(2, 1) == [Ack(2, 1, 1)]
    assert intake.unacknowledged == 0


def test_a_completed_checkpoint_also_acknowledges_what_an_aborted_older_one_covered():
    intake = MqttIntake()
    for mid in (1, 2):
        intake.offer(message(mid, "x"))
        intake.poll(1)
        intake.snapshot(mid)    # checkpoint 1 is aborted, 2 completes
    assert intake.completed(2, 1) == [Ack(1, 1, 1), Ack(2, 1, 1)]


def test_messages_of_an_older_connection_are_not_acknowledged_on_a_newer_one():
    intake = MqttIntake()
    intake.offer(message(5, "old", session=1))
    intake.offer(message(5, "again", session=2))  # redelivered after a reconnect
    assert intake.poll(10) == ["old", "again"]    # at least once: both go on
    intake.snapshot(1)
    assert intake.completed(1, session=2) == [Ack(5, 1, 2)]


def test_qos_0_messages_need_no_acknowledgement():
    intake = MqttIntake()
    intake.offer(message(0, "x", qos=0))
    intake.poll(1)
    intake.snapshot(1)
    assert intake.completed(1, 1) == []


def test_beyond_the_bound_messages_are_left_to_the_broker_until_a_reconnect(caplog):
    intake = MqttIntake(max_buffered=2)
    with caplog.at_level(logging.WARNING):
        for mid in range(1, 5):
            intake.offer(message(mid, str(mid)))
    assert intake.waiting == 2 and intake.overflows == 2
    assert "left unacknowledged" in caplog.text
    assert not intake.overflowed  # two still wait: no reconnect yet
    assert intake.poll(10) == ["1", "2"]
    assert intake.overflowed      # drained: reconnect, the broker sends 3 and 4 again
    intake.reconnected()
    assert not intake.overflowed


def test_the_snapshot_is_counts_only_and_restores_them():
    intake = MqttIntake(max_payload=1)
    intake.offer(message(1, "too long"))
    intake.poll(1)
    state = json.loads(json.dumps(intake.snapshot(3)))
    restored = MqttIntake()
    restored.restore(state)
    assert (restored.dropped, restored.overflows) == (1, 0)
    restored.restore(None)
    assert restored.dropped == 1
