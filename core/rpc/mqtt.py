"""MqttRpcService: the real transport, one paho client per process.

Topics (relative to ``clusterdeck/<cluster-id>/``, shaped by TopicLayout):
``rpc/<endpoint>/<sender>`` (QoS 1) carries tells and asks, ``heartbeat/<endpoint>/<sender>``
(QoS 0) heartbeats, ``reply/<service>/<sender>`` (QoS 1) answers. Correlation ids and reply
addresses travel in the payload, as MQTT 3.1.1 (all amqtt speaks) has no response topics.
A message whose ``from`` is not the identity its topic names is refused (``_receive``).
``presence/<service>`` is retained and doubles as the last will, so a dead process is
seen within milliseconds.

paho's callbacks run on its network thread: they decode, validate and enqueue, nothing
more. What an endpoint sends is written to the socket by the thread that sends it
(``write_now``), not handed back to the network thread. Retained state is published
again after every reconnect, because a restarted broker has forgotten it.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.client import make_client
from clusterdeck.core.rpc._codec import decode
from clusterdeck.core.rpc._endpoint import transport_thread
from clusterdeck.core.rpc._errors import RpcError
from clusterdeck.core.rpc._service import EventCallback, RpcService
from clusterdeck.core.rpc._topics import (
    TRANSPORT_CHANNELS,
    TopicLayout,
    sent_by,
    topic_matches,
)

log = logging.getLogger(__name__)


class BrokerUnreachableError(RpcError, ConnectionError):
    """The broker could not be reached, or refused this client's credentials."""


@dataclass(frozen=True)
class Traffic:
    """One control-plane message seen by a tap: who sent what to whom, how big."""

    at: float
    channel: str  # rpc, reply or heartbeat
    receiver: str
    sender: str
    kind: str
    type_name: str
    size: int
    message: Any = None
    error: str = ""


TrafficCallback = Callable[[Traffic], None]


def traffic_record(at: float, channel: str, receiver: str, data: bytes,
                   framesize: int) -> Traffic:
    """What a tap shows of one payload: decoded when it can be, else why not."""
    try:
        envelope = decode(data, framesize)
    except RpcError as error:
        return Traffic(at, channel, receiver, "?", "?", "?", len(data), error=str(error))
    return Traffic(at, channel, receiver, envelope.sender, envelope.kind,
                   envelope.type_name or ("error" if envelope.error else "None"),
                   len(data), envelope.message, (envelope.error or {}).get("message", ""))
RawCallback = Callable[[str, bytes], None]


class MqttRpcService(RpcService):
    def __init__(self, address: BrokerAddress, topics: TopicLayout, service_id: str | None = None,
                 *, online: Any = None, offline: Any = None, identity: str | None = None,
                 **options: Any) -> None:
        """``identity``: who this process is on the wire, as its login allows (broker/acl.py):
        its own service id, or the identity it shares with others of its login (then its
        service id is ``<identity>-<something>``)."""
        super().__init__(service_id, **options)
        self.address = address
        self.topics = topics
        self.identity = identity or self.service_id
        if not sent_by(self.identity, self.service_id):
            raise ValueError(f"service {self.service_id!r} cannot speak as {self.identity!r}")
        # (topic filter, callback, whether it takes the decoded message)
        self._subscriptions: list[tuple[str, EventCallback, bool]] = []
        self._taps: list[TrafficCallback] = []
        self._raw: list[RawCallback] = []
        self._retained: dict[str, bytes] = {}
        self._online = online
        self._offline = offline
        self.instance_id = ""
        self._connected = threading.Event()
        self._connect_error: str | None = None
        will = None
        if offline is not None:
            will = (self.topics.presence(self.service_id), self.encode_event(offline), 1, True)
        self._client = make_client(address, self._client_id(), will=will)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_message = self._on_message

    def _client_id(self) -> str:
        """A process with a login of its own gets an unguessable client id, so nobody can
        connect under it and push it off the broker; one that shares its login (a client)
        needs a client id the broker binds its reply topic to (``%c``, broker/acl.py)."""
        if self.identity != self.service_id:
            return self.topics.client_id(self.service_id)
        return f"{self.topics.client_id(self.service_id)}.{secrets.token_hex(8)}"

    # -- connection -------------------------------------------------------------------------

    def connect(self, timeout: float = 10.0) -> MqttRpcService:
        """Connect and wait for the broker's answer; raise BrokerUnreachableError."""
        try:
            self._client.connect_async(self.address.host, self.address.port, keepalive=10)
        except (OSError, ValueError) as error:
            raise BrokerUnreachableError(f"broker {self.address.url()}: {error}") from None
        self._client.loop_start()
        if not self._connected.wait(timeout) or self._connect_error:
            self._client.loop_stop()
            reason = self._connect_error or f"no answer within {timeout:g} s"
            raise BrokerUnreachableError(f"cannot connect to broker {self.address.url()} "
                                         f"as {self.address.username!r}: {reason}")
        return self

    @property
    def is_connected(self) -> bool:
        return self._client.is_connected()

    @property
    def is_serving(self) -> bool:
        """Connected, with paho's network thread alive: that thread ends for good if
        anything escapes a callback, and the process would then hear nothing."""
        return self._client.is_connected() and self._network_thread_alive()

    @property
    def is_reconnecting(self) -> bool:
        """Not connected, with paho's network thread alive: it keeps reconnecting."""
        return not self._client.is_connected() and self._network_thread_alive()

    def _network_thread_alive(self) -> bool:
        thread = getattr(self._client, "_thread", None)
        return thread is not None and thread.is_alive()

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any,
                    reason: Any, properties: Any = None) -> None:
        """paho's network thread; guarded like ``_on_message``."""
        try:
            self._connected_to_broker(client, reason)
        except Exception as error:
            log.exception("%s: setting up the connection failed", self.service_id)
            self._connect_error = f"setting up the connection failed: {error}"
            self._connected.set()

    def _connected_to_broker(self, client: mqtt.Client, reason: Any) -> None:
        if reason.is_failure:
            self._connect_error = str(reason)
            self._connected.set()
            client.disconnect()
            return
        topics = [self.topics.reply(self.service_id)]  # from any sender: "+"
        for endpoint_id in self._endpoint_ids():
            topics += [self.topics.rpc(endpoint_id), self.topics.heartbeat(endpoint_id)]
        topics += [self.topics.absolute(f) for f, _, _ in self._subscriptions]
        if self._taps:
            topics += [self.topics.absolute(f"{channel}/#") for channel in TRANSPORT_CHANNELS]
        for topic in dict.fromkeys(topics):
            client.subscribe(topic, qos=1)
        if self._raw:
            client.subscribe(self.topics.absolute("#"), qos=0)
        if self._online is not None:
            self.publish(self.topics.relative(self.topics.presence(self.service_id)),
                         self._online, retained=True)
        for topic, data in list(self._retained.items()):
            client.publish(topic, data, qos=1, retain=True)
        self._connected.set()

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any,
                       properties: Any = None) -> None:
        if reason.is_failure:
            log.warning("%s: lost the broker (%s); reconnecting", self.service_id, reason)

    def _endpoint_ids(self) -> list[str]:
        with self._lock:
            return list(self._endpoints)

    def _endpoint_added(self, endpoint_id: str) -> None:
        self._client.subscribe(self.topics.rpc(endpoint_id), qos=1)
        self._client.subscribe(self.topics.heartbeat(endpoint_id), qos=0)

    def _endpoint_removed(self, endpoint_id: str) -> None:
        self._client.unsubscribe([self.topics.rpc(endpoint_id),
                                  self.topics.heartbeat(endpoint_id)])

    # -- receiving ------------------------------------------------------------------------------

    def _on_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        """paho's network thread. Nothing may escape: an exception here would end that
        thread, and with it every heartbeat and message of this process."""
        try:
            for callback in self._raw:
                callback(self.topics.relative(msg.topic), msg.payload)
            with transport_thread():  # an idle endpoint runs the message right here
                self._route(msg)
        except Exception:
            log.exception("%s: a message on %s could not be handled; dropped",
                          self.service_id, msg.topic)

    def _route(self, msg: mqtt.MQTTMessage) -> None:
        channel, name, sender = self.topics.parse(msg.topic)
        if channel in TRANSPORT_CHANNELS:
            if self._taps:
                self._tap(channel, name or self.topics.relative(msg.topic), msg.payload)
            # Only messages for this process: a tap also receives everybody else's.
            if name is None or sender is None:
                return
            if channel == "reply" and name == self.service_id:
                self._receive(None, msg.payload, sender)
            elif channel != "reply" and self.endpoint(name) is not None:
                self._receive(name, msg.payload, sender)
        else:
            self._deliver_event(self.topics.relative(msg.topic), msg.payload)

    def tap(self, callback: TrafficCallback) -> None:
        """Watch the whole control plane (every rpc, reply and heartbeat message of the
        cluster) without taking part: for the GUI's messages view. ``callback`` runs on
        paho's network thread. Only the jobmanager login may read all of it (broker/acl.py);
        with another, the broker delivers just what that login may read."""
        self._taps.append(callback)
        for channel in TRANSPORT_CHANNELS:
            self._client.subscribe(self.topics.absolute(f"{channel}/#"), qos=0)

    def follow_raw(self, callback: RawCallback) -> None:
        """Call ``callback(topic, payload)`` with every payload published under the
        cluster's root, as it travelled and undecoded (topic relative to the root): for
        the flight recorder, which must not pay for decoding what it stores. QoS 0: a
        watcher must not slow the cluster down with acknowledgements. Runs on paho's
        network thread; only the observer and jobmanager logins may read all of it."""
        self._raw.append(callback)
        self._client.subscribe(self.topics.absolute("#"), qos=0)

    def _tap(self, channel: str, receiver: str, data: bytes) -> None:
        record = traffic_record(time.time(), channel, receiver, data, self.framesize)
        for callback in self._taps:
            callback(record)

    def _deliver_event(self, relative: str, data: bytes) -> None:
        callbacks = [(cb, decoded) for f, cb, decoded in list(self._subscriptions)
                     if topic_matches(f, relative)]
        if not callbacks or not data:
            return  # an empty payload clears a retained topic
        message: Any = data
        if any(decoded for _, decoded in callbacks):
            try:
                message = self.decode_event(data)
            except RpcError as error:
                log.warning("%s: dropped an event on %s: %s", self.service_id, relative, error)
                callbacks = [(cb, decoded) for cb, decoded in callbacks if not decoded]
        for callback, decoded in callbacks:
            try:
                callback(relative, message if decoded else data)
            except Exception:
                log.exception("%s: event callback for %s failed", self.service_id, relative)

    # -- sending ----------------------------------------------------------------------------------

    def _transmit(self, target: str, data: bytes, *, heartbeat: bool) -> None:
        if heartbeat:
            self._client.publish(self.topics.heartbeat(target, self.identity), data, qos=0)
        else:
            self._client.publish(self.topics.rpc(target, self.identity), data, qos=1)
        self._client.write_now()

    def _transmit_reply(self, reply_to: str, data: bytes) -> None:
        self._client.publish(self.topics.reply(reply_to, self.identity), data, qos=1)
        self._client.write_now()

    def host_of(self, endpoint_id: str) -> str | None:
        return self.topics.host_of(endpoint_id)

    def publish(self, topic: str, message: Any, *, retained: bool = False, qos: int = 1) -> None:
        data = self.encode_event(message)
        absolute = self.topics.absolute(topic)
        if retained:
            self._retained[absolute] = data
        self._client.publish(absolute, data, qos=qos, retain=retained)
        self._client.write_now()

    def clear_retained(self, topic: str) -> None:
        absolute = self.topics.absolute(topic)
        self._retained.pop(absolute, None)
        self._client.publish(absolute, b"", qos=1, retain=True)

    def subscribe(self, topic_filter: str, callback: EventCallback, *,
                  decoded: bool = True) -> None:
        self._subscriptions.append((topic_filter, callback, decoded))
        self._client.subscribe(self.topics.absolute(topic_filter), qos=1)

    def unsubscribe(self, topic_filter: str, callback: EventCallback) -> None:
        self._subscriptions = [s for s in self._subscriptions if s[:2] != (topic_filter, callback)]
        if all(f != topic_filter for f, _, _ in self._subscriptions):
            self._client.unsubscribe(self.topics.absolute(topic_filter))

    def forget_retained(self, topic: str) -> None:
        self._retained.pop(self.topics.absolute(topic), None)

    def close(self) -> None:
        """Stop the endpoints, then leave the broker; a clean leave sends no will, so the
        offline presence is published by hand first."""
        super().close()
        if self._offline is not None and self._client.is_connected():
            info = self._client.publish(self.topics.presence(self.service_id),
                                        self.encode_event(self._offline), qos=1, retain=True)
            with contextlib.suppress(RuntimeError, ValueError):
                info.wait_for_publish(2.0)
        self._client.disconnect()
        self._client.loop_stop()
