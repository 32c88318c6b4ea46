"""MqttDataClient: one paho connection carrying a streaming job's records (an MQTT source
or sink, docs/streaming.md), beside the process's control-plane connection.

Why a connection of its own, in the transport's package. The control plane's
``MqttRpcService`` has a clean session under a random client id and acknowledges every
message at once; a source needs a **persistent session** under a client id that stays
the same across attempts and **manual acknowledgements** (sent only once a checkpoint
covers the message), so the broker keeps and redelivers what a failed attempt had not
committed. It is built by broker/client.py as every other client (Nagle off, TLS with the
address's CA, MQTT 3.1.1) and lives here so that only the transport imports paho
(pyproject.toml's import contract).

Threads. paho's network thread runs the callbacks: ``on_delivery`` must only enqueue.
The owner (a task's slot thread) calls ``ack``, ``publish`` and ``close``; paho guards
its own out-queue, and acknowledgements are written by the network thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.client import BrokerConnectError, connect_and_wait, make_client

log = logging.getLogger(__name__)

KEEPALIVE = 30


class DataConnectionError(ConnectionError):
    """The broker refused the connection or a subscription of a stream's connection."""


@dataclass(frozen=True)
class Delivery:
    """One message as it arrived: ``session`` counts the connections of this client (a
    message id means something only within the connection that delivered it)."""

    message_id: int
    qos: int
    topic: str
    payload: bytes
    session: int


class PublishHandle:
    """An outgoing message's fate: published (its PUBACK came, for QoS 1) or not yet."""

    def __init__(self, info: mqtt.MQTTMessageInfo) -> None:
        self._info = info

    def done(self) -> bool:
        return self._info.is_published()

    def wait(self, timeout: float) -> bool:
        """Whether it was published within ``timeout`` seconds."""
        try:
            self._info.wait_for_publish(timeout)
        except (RuntimeError, ValueError):  # paho: not queued, or the client stopped
            return False
        return self._info.is_published()


class MqttDataClient:
    """A connection for records. ``persistent``: keep the session (and the messages not
    acknowledged) across disconnects, under the fixed ``client_id``; ``manual_ack``:
    acknowledge received messages only by ``ack``; ``subscriptions``: (filter, qos),
    subscribed again after every reconnect."""

    def __init__(self, address: BrokerAddress, client_id: str, *, persistent: bool = False,
                 manual_ack: bool = False, subscriptions: tuple[tuple[str, int], ...] = (),
                 on_delivery: Callable[[Delivery], None] | None = None) -> None:
        self.address = address
        self._subscriptions = subscriptions
        self._on_delivery = on_delivery
        self._session = 0
        self._lock = threading.Lock()
        self._refused: str | None = None
        self._subscribe_ids: dict[int, str] = {}
        self._client = make_client(address, client_id, clean_session=not persistent)
        self._client.manual_ack_set(manual_ack)
        self._client.on_connect = self._on_connect
        self._client.on_subscribe = self._on_subscribe
        self._client.on_message = self._on_message
        self._client.on_disconnect = self._on_disconnect

    def connect(self, timeout: float = 10.0) -> MqttDataClient:
        """Connect and wait for the broker's answer (DataConnectionError if refused or
        unreachable); paho reconnects by itself afterwards."""
        try:
            connect_and_wait(self._client, self.address, timeout, KEEPALIVE)
        except BrokerConnectError as error:
            raise DataConnectionError(str(error)) from None
        return self

    @property
    def session(self) -> int:
        """The number of the current connection (1 for the first): deliveries of an older
        one cannot be acknowledged any more."""
        with self._lock:
            return self._session

    @property
    def refused(self) -> str | None:
        """Why the broker refused a subscription, if it did."""
        with self._lock:
            return self._refused

    @property
    def connected(self) -> bool:
        return self._client.is_connected()

    def ack(self, message_id: int, qos: int) -> None:
        self._client.ack(message_id, qos)

    def publish(self, topic: str, payload: bytes, qos: int, retain: bool) -> PublishHandle:
        """Queue ``payload`` (paho resends QoS 1 after a reconnect until its PUBACK)."""
        return PublishHandle(self._client.publish(topic, payload, qos=qos, retain=retain))

    def close(self) -> None:
        """Leave the broker; a persistent session and its unacknowledged messages stay
        there for the next attempt."""
        self._client.disconnect()
        self._client.loop_stop()

    # -- paho's network thread ----------------------------------------------------------------

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any,
                    properties: Any = None) -> None:
        if reason.is_failure:
            return
        with self._lock:
            self._session += 1
        for topic_filter, qos in self._subscriptions:
            _, mid = client.subscribe(topic_filter, qos=qos)
            if mid is not None:
                with self._lock:
                    self._subscribe_ids[mid] = topic_filter

    def _on_subscribe(self, client: mqtt.Client, userdata: Any, mid: int,
                      reasons: list[Any], properties: Any = None) -> None:
        with self._lock:
            topic_filter = self._subscribe_ids.pop(mid, "?")
            if any(reason.is_failure for reason in reasons):
                self._refused = (f"the broker at {self.address.url()} refused the "
                                 f"subscription to {topic_filter!r}")

    def _on_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        """Nothing may escape: paho's thread would end, and with it this connection."""
        if self._on_delivery is None:
            return
        try:
            self._on_delivery(Delivery(msg.mid, msg.qos, msg.topic, msg.payload,
                                       self.session))
        except Exception:
            log.exception("a message on %s could not be taken; not acknowledged", msg.topic)

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any,
                       properties: Any = None) -> None:
        if reason.is_failure:
            log.warning("stream connection to %s lost (%s); reconnecting",
                        self.address.url(), reason)
