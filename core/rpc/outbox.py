"""Messages to one destination, gathered during one turn of an endpoint's mailbox and
sent as one batch (as Flink's batch scheduler deploys what is ready together).

Endpoint code only: an Outbox is touched on its endpoint's main thread, so it needs no
lock. The first item after a take asks for a flush, which the endpoint posts to the end
of its mailbox (``run_async``): whatever the messages already waiting there add goes
into the same batch. A batch keeps its destination's order and holds at most ``most``
items; one too large for a frame is sent again in halves (``send_in_halves``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from clusterdeck.core.rpc._errors import FrameTooLargeError

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Outbox(Generic[K, T]):
    def __init__(self, most: int) -> None:
        if most < 1:
            raise ValueError(f"a batch holds at least one item, not {most}")
        self.most = most
        self._waiting: dict[K, list[T]] = {}

    def add(self, destination: K, item: T) -> bool:
        """Queue ``item``; True when it is the first since the last take, so the caller
        posts one flush."""
        first = not self._waiting
        self._waiting.setdefault(destination, []).append(item)
        return first

    def take(self) -> list[tuple[K, tuple[T, ...]]]:
        """Everything queued, as batches of at most ``most`` items per destination, in
        the order they were added."""
        waiting, self._waiting = self._waiting, {}
        return [(destination, tuple(items[start:start + self.most]))
                for destination, items in waiting.items()
                for start in range(0, len(items), self.most)]

    def __len__(self) -> int:
        return sum(len(items) for items in self._waiting.values())


class Linger:
    """When an Outbox's next flush goes: at once after a quiet spell (a lone message is
    not delayed), else ``interval`` after the last one, so that a busy stream of items
    goes in one batch per interval instead of one per turn of the mailbox."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._flushed = float("-inf")

    def delay(self, now: float) -> float:
        """Seconds from ``now`` until the flush asked for now may go (0: at once)."""
        return max(0.0, self._flushed + self.interval - now)

    def flushed(self, now: float) -> None:
        self._flushed = now


def halves(items: tuple[T, ...]) -> tuple[tuple[T, ...], tuple[T, ...]]:
    """A batch that did not fit in a frame, as two that may (each non-empty)."""
    if len(items) < 2:
        raise ValueError("a batch of one item cannot be halved")
    middle = len(items) // 2
    return items[:middle], items[middle:]


def send_in_halves(batch: tuple[T, ...], send: Callable[[tuple[T, ...]], None],
                   alone: Callable[[T, FrameTooLargeError], None] | None = None) -> None:
    """``send(batch)``; a batch whose message is too large for a frame (the codec refuses
    it before sending) goes again as two halves, the same way, down to single items. One
    item that still does not fit goes to ``alone(item, error)``; without it the error is
    raised."""
    try:
        send(batch)
    except FrameTooLargeError as error:
        if len(batch) > 1:
            for half in halves(batch):
                send_in_halves(half, send, alone)
        elif alone is None:
            raise
        else:
            alone(batch[0], error)
