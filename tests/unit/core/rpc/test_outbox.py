"""The batching rules of core/rpc/outbox.py: what goes into one message."""

from __future__ import annotations

import pytest

from clusterdeck.core.rpc import FrameTooLargeError
from clusterdeck.core.rpc.outbox import Outbox, halves, send_in_halves


def test_only_the_first_item_of_a_turn_asks_for_a_flush() -> None:
    outbox: Outbox[str, int] = Outbox(most=10)
    assert outbox.add("tm-1", 1) is True
    assert outbox.add("tm-2", 2) is False
    assert outbox.add("tm-1", 3) is False
    outbox.take()
    assert outbox.add("tm-1", 4) is True


def test_one_batch_per_destination_in_the_order_added() -> None:
    outbox: Outbox[str, int] = Outbox(most=10)
    for destination, item in [("tm-1", 1), ("tm-2", 2), ("tm-1", 3), ("tm-2", 4), ("tm-1", 5)]:
        outbox.add(destination, item)
    assert outbox.take() == [("tm-1", (1, 3, 5)), ("tm-2", (2, 4))]
    assert outbox.take() == []
    assert len(outbox) == 0


def test_a_batch_holds_at_most_most_items_and_keeps_their_order() -> None:
    outbox: Outbox[str, int] = Outbox(most=3)
    for item in range(8):
        outbox.add("tm-1", item)
    assert len(outbox) == 8
    assert outbox.take() == [("tm-1", (0, 1, 2)), ("tm-1", (3, 4, 5)), ("tm-1", (6, 7))]


def test_halves_split_a_batch_into_two_non_empty_ones_in_order() -> None:
    assert halves((1, 2)) == ((1,), (2,))
    assert halves((1, 2, 3, 4, 5)) == ((1, 2), (3, 4, 5))
    with pytest.raises(ValueError):
        halves((1,))
    with pytest.raises(ValueError):
        Outbox(most=0)


def test_a_batch_too_large_for_a_frame_is_sent_in_halves_down_to_single_items() -> None:
    sent: list[tuple[int, ...]] = []
    lone: list[int] = []

    def send(batch: tuple[int, ...]) -> None:  # a frame holds two items, and never item 9
        if len(batch) > 2 or 9 in batch:
            raise FrameTooLargeError("too large")
        sent.append(batch)

    send_in_halves((1, 2, 3, 4, 9, 6), send, lambda item, _error: lone.append(item))
    assert sent == [(1,), (2, 3), (4,), (6,)] and lone == [9]
    with pytest.raises(FrameTooLargeError):
        send_in_halves((9,), send)


def test_a_flush_after_a_quiet_spell_goes_at_once_a_busy_one_waits_for_the_interval() -> None:
    from clusterdeck.core.rpc.outbox import Linger
    linger = Linger(0.005)
    assert linger.delay(now=100.0) == 0.0       # nothing sent yet
    linger.flushed(100.0)
    assert linger.delay(now=100.001) == pytest.approx(0.004)   # busy: with the next ones
    assert linger.delay(now=100.005) == 0.0     # a whole interval since the last flush
    assert linger.delay(now=250.0) == 0.0
