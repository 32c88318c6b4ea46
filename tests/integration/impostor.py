"""A raw paho client with a TaskManager login, speaking the protocol by hand: what a
login handed to another machine, or stolen, can send."""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid

from clusterdeck.broker.client import connect_and_wait, make_client
from clusterdeck.core.protocol import topics
from clusterdeck.core.rpc import Envelope, decode, encode

DELIVERY_TIMEOUT = 5.0


class Impostor:
    """A raw paho client with a TaskManager login no TaskManager of the cluster uses, as
    one handed to another machine would be, speaking the protocol by hand."""

    def __init__(self, local_cluster, name: str = "taskmanager-64") -> None:
        self.name = name
        self.layout = topics.layout(local_cluster.cluster_id)
        self.framesize = local_cluster.config["rpc.framesize"]
        self.replies: queue.Queue[Envelope] = queue.Queue()
        address = local_cluster.broker_address("taskmanager", name)
        self.client = make_client(address, f"impostor-{uuid.uuid4().hex}")
        self.client.on_message = lambda c, u, m: self.replies.put(decode(m.payload,
                                                                         self.framesize))
        connect_and_wait(self.client, address, DELIVERY_TIMEOUT)
        acked = threading.Event()
        self.client.on_subscribe = lambda *_: acked.set()
        self.client.subscribe(self.layout.reply(name), qos=1)
        assert acked.wait(DELIVERY_TIMEOUT), "no SUBACK"

    def ask(self, endpoint: str, message: object, *, claims: str | None = None) -> str:
        """Send an ask to ``endpoint`` saying it is from ``claims`` (default: itself)."""
        sender = claims or self.name
        correlation_id = uuid.uuid4().hex
        envelope = Envelope("ask", sender, message, correlation_id=correlation_id,
                            reply_to=sender)
        self.client.publish(self.layout.rpc(endpoint, self.name),
                            encode(envelope, self.framesize), qos=1).wait_for_publish(5)
        return correlation_id

    def tell(self, endpoint: str, message: object, fencing_token: str) -> None:
        envelope = Envelope("tell", self.name, message, fencing_token=fencing_token)
        self.client.publish(self.layout.rpc(endpoint, self.name),
                            encode(envelope, self.framesize), qos=1).wait_for_publish(5)

    def ask_raw(self, endpoint: str, type_name: str, body: object) -> str:
        """An ask whose body is whatever the caller says, as no encoder would write it."""
        correlation_id = uuid.uuid4().hex
        document = {"v": 1, "kind": "ask", "from": self.name, "id": correlation_id,
                    "reply_to": self.name, "fencing": None, "type": type_name,
                    "body": body, "error": None}
        self.client.publish(self.layout.rpc(endpoint, self.name), json.dumps(document),
                            qos=1).wait_for_publish(5)
        return correlation_id

    def answer(self, correlation_id: str, timeout: float = 30.0) -> Envelope:
        deadline = time.monotonic() + timeout
        while True:
            envelope = self.replies.get(timeout=max(0.01, deadline - time.monotonic()))
            if envelope.correlation_id == correlation_id:
                return envelope

    def leader_token(self) -> str:
        """The leading JobManager's fencing token, as every login reads it (retained on
        ``state/leader``); the replies' handler stays as it is."""
        leader: queue.Queue[bytes] = queue.Queue()
        topic = self.layout.absolute(topics.LEADER)
        self.client.message_callback_add(topic, lambda c, u, m: leader.put(m.payload))
        self.client.subscribe(topic, qos=1)
        return decode(leader.get(timeout=DELIVERY_TIMEOUT), self.framesize).message \
            .fencing_token

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
