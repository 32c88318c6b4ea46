"""What an MQTT source does with the messages it receives, apart from the connection: the
records they become, the bound on what waits, and which messages a completed checkpoint
lets it acknowledge (docs/streaming.md, "The MQTT source").

MQTT cannot replay, so the source's guarantee rests on the broker: it subscribes with
QoS 1 in a persistent session and acknowledges a message (PUBACK) only once a completed
checkpoint covers the record it became. Until then the broker counts it as in flight and,
should the task fail, delivers it again to the next attempt's connection of the same
session: **at least once** on a broker that keeps a persistent session's unacknowledged
messages (MQTT 3.1.1, 4.4; Mosquitto does). Nothing of it is in the checkpoint: the
broker's session is the position.

``MqttIntake`` is that logic, without paho: the connection's thread ``offer``s each
delivery (decoding and queueing only); the task's slot thread ``poll``s records,
``snapshot``s at a checkpoint (the messages polled since become that checkpoint's) and
asks what to acknowledge once a checkpoint ``completed``. One lock guards the queue; the
acknowledgement bookkeeping is the slot thread's alone.

Bounds: at most ``max_buffered`` messages wait to be polled. Beyond that a message is
left unacknowledged and not kept (counted, with a warning): the broker still holds it and
delivers it again to the session's next connection (``overflowed`` tells the owner to
reconnect once the queue drained). A broker that honours its in-flight window (Mosquitto:
``max_inflight_messages``, 100 on a cluster's broker) never sends that many unacknowledged
messages. A payload over ``max_payload`` bytes, or one that is not JSON when records are
JSON, is dropped and counted, and acknowledged with the rest: it would come back after
every failover and fail or stall the job for ever.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

FORMATS = ("text", "json")
MAX_BUFFERED = 10_000    # messages waiting to be polled, per subtask
MAX_PAYLOAD = 1 << 20    # bytes; a larger payload is dropped and counted
WARNINGS = 10            # dropped messages logged one by one; then every WARN_EVERY-th
WARN_EVERY = 1000


@dataclass(frozen=True)
class Received:
    """A message as the connection delivered it: its id and QoS to acknowledge it, the
    connection (``session``) it came on, its payload."""

    message_id: int
    qos: int
    session: int
    payload: bytes


@dataclass(frozen=True)
class Ack:
    message_id: int
    qos: int
    session: int


class MqttIntake:
    def __init__(self, record_format: str = "text", max_buffered: int = MAX_BUFFERED,
                 max_payload: int = MAX_PAYLOAD, label: str = "mqtt source") -> None:
        if record_format not in FORMATS:
            raise ValueError(f"records are one of {FORMATS}, not {record_format!r}")
        self._format = record_format
        self._max_buffered = max_buffered
        self._max_payload = max_payload
        self._label = label
        self._lock = threading.Lock()
        self._queue: collections.deque[Received] = collections.deque()
        self._overflowed = 0       # left unacknowledged since the last ``reconnected``
        self.dropped = 0           # oversized or undecodable, acknowledged
        self.overflows = 0         # left for the broker to deliver again, in all
        # slot thread only: messages polled since the last snapshot, then per checkpoint
        self._polled: list[Ack] = []
        self._pending: dict[int, list[Ack]] = {}

    # -- the connection's thread --------------------------------------------------------------

    def offer(self, message: Received) -> None:
        """Queue ``message``, or leave it to the broker when ``max_buffered`` wait."""
        with self._lock:
            if len(self._queue) < self._max_buffered:
                self._queue.append(message)
                return
            self._overflowed += 1
            self.overflows += 1
            count = self.overflows
        if count <= WARNINGS or count % WARN_EVERY == 0:
            log.warning("%s: %d messages wait already; message %d left unacknowledged for "
                        "the broker to deliver again (%d so far)", self._label,
                        self._max_buffered, message.message_id, count)

    # -- the slot thread ----------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def overflowed(self) -> bool:
        """Messages were left to the broker and the queue is empty: time to reconnect, so
        that the broker delivers them again."""
        with self._lock:
            return self._overflowed > 0 and not self._queue

    def reconnected(self) -> None:
        with self._lock:
            self._overflowed = 0

    def poll(self, limit: int) -> list[Any]:
        """Up to ``limit`` records, in the order their messages came."""
        with self._lock:
            taken = [self._queue.popleft() for _ in range(min(limit, len(self._queue)))]
        records = []
        for message in taken:
            self._polled.append(Ack(message.message_id, message.qos, message.session))
            record = self._record(message.payload)
            if record is not None:
                records.append(record)
        return records

    def _record(self, payload: bytes) -> Any:
        """The record of ``payload``, or None when it is dropped."""
        if len(payload) > self._max_payload:
            return self._drop(f"a payload of {len(payload)} bytes (more than "
                              f"{self._max_payload})")
        text = payload.decode("utf-8", "replace")
        if self._format == "text":
            return text
        try:
            return json.loads(text)
        except ValueError as error:
            return self._drop(f"a payload that is not JSON ({error})")

    def _drop(self, what: str) -> None:
        self.dropped += 1
        if self.dropped <= WARNINGS or self.dropped % WARN_EVERY == 0:
            log.warning("%s: dropped %s; %d dropped so far", self._label, what, self.dropped)
        return None

    def snapshot(self, checkpoint_id: int) -> dict[str, int]:
        """The messages polled since the last snapshot are this checkpoint's to
        acknowledge. The state is only counts: the broker's session is the position."""
        self._pending.setdefault(checkpoint_id, []).extend(self._polled)
        self._polled = []
        return {"dropped": self.dropped, "overflows": self.overflows}

    def restore(self, state: Any) -> None:
        if state:
            self.dropped = int(state.get("dropped", 0))
            self.overflows = int(state.get("overflows", 0))

    def completed(self, checkpoint_id: int, session: int) -> list[Ack]:
        """The acknowledgements checkpoint ``checkpoint_id`` (and every older one) allows,
        in the order the messages came; those of an older connection are forgotten (the
        broker delivers them again on this one: a message id means nothing elsewhere)."""
        done = sorted(c for c in self._pending if c <= checkpoint_id)
        acks = [ack for c in done for ack in self._pending.pop(c)]
        return [ack for ack in acks if ack.session == session and ack.qos > 0]

    @property
    def unacknowledged(self) -> int:
        """Messages polled that no completed checkpoint covers yet."""
        return len(self._polled) + sum(map(len, self._pending.values()))
