"""MQTT sources and sinks of streaming jobs on a real cluster and its broker (Mosquitto
when installed; docs/streaming.md, "The MQTT source and sink"): messages a raw paho client
publishes while the job runs reach the file sink, each at least once, even with a
TaskManager killed mid-stream; a job's MQTT sink is read back by a raw paho client; and a
TaskManager's login may use the cluster's ``data/`` topics and nothing more of them."""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdeck.broker.client import connect_and_wait, make_client
from tests.integration.clusters import SPARK_UP_AND_RESTARTS
from tests.integration.test_failover import pid_of, running_on
from tests.integration.test_streaming import committed
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster(SPARK_UP_AND_RESTARTS)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "streaming_mqtt.py"


class Raw:
    """A raw paho client with one of the cluster's logins, recording what it receives."""

    def __init__(self, local_cluster, role: str, name: str | None = None) -> None:
        self.root = f"clusterdeck/{local_cluster.cluster_id}/"
        address = local_cluster.broker_address(role, name)
        self.received: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.client = make_client(address, f"test-{role}-{uuid.uuid4().hex[:8]}")
        self.client.on_message = lambda c, u, m: self.received.put((m.topic, m.payload))
        connect_and_wait(self.client, address, 10)

    def subscribe(self, relative: str) -> None:
        acked = threading.Event()
        self.client.on_subscribe = lambda *_: acked.set()
        result, _ = self.client.subscribe(self.root + relative, qos=1)
        assert result == 0 and acked.wait(10), f"no SUBACK for {relative}"

    def publish(self, relative: str, payloads: list[str]) -> None:
        infos = [self.client.publish(self.root + relative, text.encode(), qos=1)
                 for text in payloads]
        for info in infos:
            info.wait_for_publish(10)

    def payloads(self, wait: float = 0.0) -> list[tuple[str, str]]:
        got = []
        deadline = time.monotonic() + wait
        while True:
            try:
                topic, data = self.received.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return got
            got.append((topic.removeprefix(self.root), data.decode()))

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def raw(cluster) -> Iterator:
    made: list[Raw] = []

    def make(role: str, name: str | None = None) -> Raw:
        made.append(Raw(cluster[0], role, name))
        return made[-1]

    yield make
    for each in made:
        each.close()


def started(publisher: Raw, topic: str, seen) -> None:
    """Publish a warm-up message until the job's output shows one: its subscriptions are
    in place (a message published before a source subscribed is not its)."""
    def through() -> bool:
        publisher.publish(topic, ["warm-up"])
        return seen()
    wait_for(through, 60, "the job's first output", interval=0.5)


def messages(first: int, count: int) -> list[str]:
    return [f"message-{n}" for n in range(first, first + count)]


def test_messages_reach_the_file_sink_at_least_once_with_a_taskmanager_killed_mid_stream(
        client, cluster, raw, tmp_path) -> None:
    local_cluster, _ = cluster
    out, topic = tmp_path / "out", f"t{uuid.uuid4().hex[:6]}/in"
    publisher = raw("client")
    job_id = client.submit(EXAMPLE, (topic, str(out), "2"))
    try:
        started(publisher, f"data/{topic}", lambda: bool(committed(out)))
        publisher.publish(f"data/{topic}", messages(0, 300))
        wait_for(lambda: "MESSAGE-0" in committed(out) or "MESSAGE-299" in committed(out),
                 30, "the first messages committed")
        victim = wait_for(lambda: (s := client.snapshot(job_id, 1.0)) and running_on(
            "mqtt_source", s.graph), 30, "a source subtask running")
        publisher.publish(f"data/{topic}", messages(300, 200))
        os.kill(pid_of(local_cluster, victim), signal.SIGKILL)
        publisher.publish(f"data/{topic}", messages(500, 300))
        expected = {line.upper() for line in messages(0, 800)}
        wait_for(lambda: expected <= set(committed(out)), 60,
                 "every message committed at least once")
        lines = [line for line in committed(out) if line != "WARM-UP"]
        assert set(lines) == expected  # nothing else; repeats allowed
    finally:
        client.cancel(job_id)


def test_a_jobs_mqtt_sink_is_read_back_by_a_raw_client(client, raw) -> None:
    topic = f"t{uuid.uuid4().hex[:6]}"
    publisher, reader = raw("client"), raw("client")
    reader.subscribe(f"data/{topic}/out")
    job_id = client.submit(EXAMPLE, (f"{topic}/in", f"mqtt:{topic}/out", "1"))
    try:
        started(publisher, f"data/{topic}/in",
                lambda: any(p == "WARM-UP" for _, p in reader.payloads(0.2)))
        publisher.publish(f"data/{topic}/in", [*messages(0, 200), " "])
        got: list[str] = []

        def all_read() -> bool:
            got.extend(p for t, p in reader.payloads(0.2) if p != "WARM-UP")
            return {line.upper() for line in messages(0, 200)} <= set(got)
        wait_for(all_read, 30, "every message published by the job")
        assert set(got) == {line.upper() for line in messages(0, 200)}
        assert {t for t, _ in reader.payloads()} <= {f"data/{topic}/out"}
    finally:
        client.cancel(job_id)


def test_a_taskmanager_login_uses_the_data_topics_and_no_more_of_them(raw) -> None:
    """MQTT 3.1.1 cannot refuse: a denied publish is dropped, a denied subscription
    delivers nothing. So delivery is checked, by the observer (reads everything)."""
    topic = f"t{uuid.uuid4().hex[:6]}"
    observer, taskmanager = raw("observer"), raw("taskmanager", "taskmanager-1")
    client = raw("client")
    observer.subscribe("#")
    taskmanager.subscribe("#")
    taskmanager.publish(f"data/{topic}", ["allowed"])
    taskmanager.publish(f"datax/{topic}", ["refused"])
    taskmanager.publish(f"events/{topic}", ["refused"])
    client.publish(f"data/{topic}/c", ["to the taskmanager"])
    client.publish(f"events/{topic}", ["refused"])
    seen = observer.payloads(1.0)
    assert (f"data/{topic}", "allowed") in seen
    assert (f"data/{topic}/c", "to the taskmanager") in seen
    assert all(payload != "refused" for _, payload in seen)
    got = [(t, p) for t, p in taskmanager.payloads(0.5) if topic in t]
    assert sorted(got) == [(f"data/{topic}", "allowed"), (f"data/{topic}/c",
                                                          "to the taskmanager")]
