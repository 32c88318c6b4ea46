"""The MQTT sink of a streaming job (docs/streaming.md, "The MQTT sink"): each record as
one message, without paho (the connection comes in as a ``Publisher``).

**At least once.** Messages are published as their batch goes through the operators,
with QoS 1 by default; a checkpoint's ``snapshot`` waits until every message published
before it was acknowledged by the broker (its PUBACK), so a completed checkpoint never
covers a message the broker has not taken. After a failover the records since the last
completed checkpoint are read and published again: a consumer may see them twice. With
QoS 0 nothing is acknowledged, so nothing is waited for: at most once.

Bounded: at most ``max_inflight`` messages wait for their PUBACK; ``write`` waits for the
oldest beyond that, which holds the task (and its source) back to the broker's pace. A
record whose payload is over ``max_payload`` bytes fails the task (a sink drops nothing
silently); ``framesize`` of a broker is where it would otherwise vanish (MQTT-FACTS).
A message not acknowledged within ``timeout`` seconds fails the write or declines the
checkpoint. Runs on the task's slot thread.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable
from typing import Protocol

MAX_INFLIGHT = 1000     # messages waiting for their PUBACK, per subtask
MAX_PAYLOAD = 1 << 20   # bytes
ACK_TIMEOUT = 30.0      # seconds a message may wait for its PUBACK


class MqttSinkError(ValueError):
    """A record could not be published (too large, or never acknowledged). A ValueError,
    so that a failed flush declines the checkpoint rather than failing it silently."""


class Pending(Protocol):
    def done(self) -> bool: ...

    def wait(self, timeout: float) -> bool: ...


class Publisher(Protocol):
    def publish(self, topic: str, payload: bytes, qos: int, retain: bool) -> Pending: ...


class MqttSink:
    def __init__(self, publisher: Publisher, topic: str, qos: int = 1, retain: bool = False,
                 max_inflight: int = MAX_INFLIGHT, max_payload: int = MAX_PAYLOAD,
                 timeout: float = ACK_TIMEOUT) -> None:
        self._publisher = publisher
        self.topic = topic
        self._qos = qos
        self._retain = retain
        self._max_inflight = max_inflight
        self._max_payload = max_payload
        self._timeout = timeout
        self._inflight: collections.deque[Pending] = collections.deque()
        self.published = 0  # messages handed to the connection

    def write(self, lines: Iterable[str]) -> None:
        """Publish each line as one message (UTF-8)."""
        for line in lines:
            payload = line.encode("utf-8", "replace")
            if len(payload) > self._max_payload:
                raise MqttSinkError(f"a record of {len(payload)} bytes is more than the MQTT "
                                    f"sink's {self._max_payload} for {self.topic!r}")
            self._settle(self._max_inflight - 1)
            pending = self._publisher.publish(self.topic, payload, self._qos, self._retain)
            self.published += 1
            if self._qos > 0:
                self._inflight.append(pending)

    def _settle(self, keep: int) -> None:
        """Wait until at most ``keep`` messages wait for their PUBACK."""
        inflight = self._inflight
        while inflight and inflight[0].done():
            inflight.popleft()
        deadline = time.monotonic() + self._timeout
        while len(inflight) > keep:
            if not inflight[0].wait(max(0.0, deadline - time.monotonic())):
                raise MqttSinkError(f"the broker did not acknowledge a message on "
                                    f"{self.topic!r} within {self._timeout:g} s")
            inflight.popleft()

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    def snapshot(self, checkpoint_id: int) -> dict[str, int]:
        """Wait for every PUBACK: what the checkpoint covers is at the broker."""
        self._settle(0)
        return {"published": self.published}

    def committed(self, checkpoint_id: int) -> None:
        """Nothing waits for a checkpoint: the messages went out already."""

    def restore(self, state: object) -> None:
        """Nothing to restore: what an earlier attempt published stays published."""
