"""The MQTT source and sink of a streaming task, wired to their connections: which broker,
which login, which topic, which client id (docs/streaming.md, "The MQTT source and sink").

Which broker. A job that names none (``url=None``) uses its cluster's, with the login of
the TaskManager that runs the task (``ClusterBroker``, handed down by the TaskManager;
the job's code never gets it), and its topics lie under the cluster's ``data/`` prefix:
``mqtt_source("sensors/+")`` reads ``clusterdeck/<cluster>/data/sensors/+``. That prefix
is all a TaskManager's login may read and write beyond the control plane (broker/acl.py).
A job that names a broker (``mqtt[s]://[user:password@]host:port``) uses that login and
its topics as they are.

Sessions. A source's subtask *s* keeps one persistent session for the job's whole life:
client id ``cd.<cluster>.<job>.<vertex>.<s>`` (the same for every attempt, so the next
attempt takes over what the failed one left unacknowledged). With more than one subtask
each subscribes to the shared subscription ``$share/<group>/<topic>`` (one group per job
vertex), so the broker hands each message to one of them; brokers without shared
subscriptions (amqtt) refuse it and the task fails saying so. A sink publishes with a
clean session under a random client id: what it sent is acknowledged before a checkpoint
completes, so there is nothing to take over.

Everything here runs on the task's slot thread, but for ``_deliver``, which paho's
thread calls.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.core.protocol import topics
from clusterdeck.core.rpc.mqttdata import DataConnectionError, Delivery, MqttDataClient
from clusterdeck.core.streaming.mqttsink import MqttSink
from clusterdeck.core.streaming.mqttsource import MqttIntake, Received

CONNECT_TIMEOUT = 10.0
IDLE_POLL = 0.05  # seconds a source with nothing waiting lets the task wait at most


class MqttConnectorError(Exception):
    """An MQTT source or sink cannot work: no broker, a refused login or subscription."""


@dataclass(frozen=True)
class ClusterBroker:
    """The cluster's broker as this TaskManager reaches it, with its own login."""

    address: BrokerAddress
    cluster_id: str

    def data_topic(self, topic: str) -> str:
        return f"{topics.ROOT}/{self.cluster_id}/{topics.data(topic)}"


def _where(params: dict[str, Any], broker: ClusterBroker | None) -> tuple[BrokerAddress, str]:
    """The broker and the absolute topic (filter) of a source's or sink's ``params``."""
    if params["url"] is not None:
        return BrokerAddress.parse(params["url"]), params["topic"]
    if broker is None:
        raise MqttConnectorError("this TaskManager knows no cluster broker to read or write "
                                 f"{params['topic']!r} on; give the job's MQTT parts a url")
    return broker.address, broker.data_topic(params["topic"])


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


def session_id(cluster_id: str, owner: str, subtask: int) -> str:
    """The client id of a source subtask's persistent session: stable across attempts."""
    return ".".join(["cd", _safe(cluster_id), *map(_safe, owner.split(".")), str(subtask)])


def shared_filter(topic_filter: str, owner: str) -> str:
    return f"$share/cd-{_safe(owner)}/{topic_filter}"


class MqttMessages:
    """The MQTT source: records from a topic, acknowledged once a completed checkpoint
    covers them (mqttsource.py). Connects in ``restore``, not before."""

    def __init__(self, params: dict[str, Any], subtask: int, parallelism: int,
                 broker: ClusterBroker | None, owner: str) -> None:
        self._address, topic_filter = _where(params, broker)
        cluster = broker.cluster_id if broker is not None else "external"
        self._client_id = session_id(cluster, owner or "job", subtask)
        self._filter = shared_filter(topic_filter, owner or "job") if parallelism > 1 \
            else topic_filter
        self._qos = params["qos"]
        self._intake = MqttIntake(params["format"], params["max_buffered"],
                                  params["max_payload"], f"mqtt source {topic_filter!r} "
                                  f"({subtask + 1}/{parallelism})")
        self._client: MqttDataClient | None = None

    @property
    def exhausted(self) -> bool:
        return False  # a topic never ends: the job runs until it is cancelled or stopped

    def _connect(self) -> None:
        client = MqttDataClient(self._address, self._client_id, persistent=True,
                                manual_ack=True, subscriptions=((self._filter, self._qos),),
                                on_delivery=self._deliver)
        try:
            self._client = client.connect(CONNECT_TIMEOUT)
        except DataConnectionError as error:
            raise MqttConnectorError(f"the MQTT source cannot connect: {error}") from None

    def _deliver(self, delivery: Delivery) -> None:
        """paho's network thread: queue it, no more."""
        self._intake.offer(Received(delivery.message_id, delivery.qos, delivery.session,
                                    delivery.payload))

    def poll(self, now: float, limit: int) -> list[Any]:
        client = self._client
        assert client is not None, "restore first"
        if client.refused:
            raise MqttConnectorError(f"{client.refused}: it allows no such subscription, or "
                                     f"has no shared subscriptions (amqtt): give the MQTT "
                                     f"source parallelism=1")
        if self._intake.overflowed:  # the broker delivers what it still holds again
            self.close()
            self._intake.reconnected()
            self._connect()
        return self._intake.poll(limit)

    def seconds_to_next(self, now: float) -> float:
        return 0.0 if self._intake.waiting else IDLE_POLL

    def snapshot(self, checkpoint_id: int) -> Any:
        return self._intake.snapshot(checkpoint_id)

    def committed(self, checkpoint_id: int) -> None:
        """Acknowledge the messages the checkpoint covers: the broker forgets them."""
        client = self._client
        if client is None:
            return
        for ack in self._intake.completed(checkpoint_id, client.session):
            client.ack(ack.message_id, ack.qos)

    def restore(self, state: Any) -> None:
        """Nothing to seek: the session holds what no completed checkpoint covered."""
        self._intake.restore(state)
        self._connect()

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            client.close()


class MqttPublished:
    """The MQTT sink: each record as a message, at least once (mqttsink.py). Connects in
    ``restore``, not before."""

    def __init__(self, params: dict[str, Any], broker: ClusterBroker | None) -> None:
        self._address, self._topic = _where(params, broker)
        self._params = params
        self._client: MqttDataClient | None = None
        self._sink: MqttSink | None = None

    def _opened(self) -> MqttSink:
        assert self._sink is not None, "restore first"
        return self._sink

    def write(self, lines: Any) -> None:
        self._opened().write(lines)

    def snapshot(self, checkpoint_id: int) -> Any:
        return self._opened().snapshot(checkpoint_id)

    def committed(self, checkpoint_id: int) -> None:
        """The messages went out before the checkpoint completed."""

    def restore(self, state: Any) -> None:
        """What an earlier attempt published stays published; connect."""
        client = MqttDataClient(self._address, f"cd-sink-{secrets.token_hex(8)}")
        try:
            self._client = client.connect(CONNECT_TIMEOUT)
        except DataConnectionError as error:
            raise MqttConnectorError(f"the MQTT sink cannot connect: {error}") from None
        params = self._params
        self._sink = MqttSink(self._client, self._topic, params["qos"], params["retain"],
                              params["max_inflight"])

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            client.close()
