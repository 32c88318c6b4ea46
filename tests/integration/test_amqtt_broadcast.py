"""amqtt 0.12.1 lost a message for every subscriber it had not reached yet when a client
subscribed while the message was being broadcast (it iterates its subscriptions across the
ACL plugin's await): a job stuck RUNNING for good in the bundle's smoke test. Our broker
iterates a snapshot (broker/embedded.py). Real broker process, real logins, raw paho."""

from __future__ import annotations

import contextlib
import threading

import pytest

from tests.integration.test_acl import Probe, rel
from tests.integration.test_broker import start_broker, stop

pytestmark = pytest.mark.integration
MESSAGES = 400


@pytest.fixture(scope="module")
def amqtt_broker(tmp_path_factory):
    running = start_broker("amqtt", tmp_path_factory.mktemp("amqtt-broadcast"))
    try:
        yield running
    finally:
        stop(running)


def test_every_message_arrives_while_other_clients_subscribe(amqtt_broker):
    topic = rel("events/broadcast/0")
    # A subscription the broadcast reaches first (and awaits the ACL for), then the ones
    # a lost broadcast would miss.
    first = Probe(amqtt_broker, "observer", "observer-first", [rel("events/broadcast/+")])
    readers = [Probe(amqtt_broker, "observer", f"observer-reader-{i}", [rel("events/#")])
               for i in range(3)]
    writer = Probe(amqtt_broker, "jobmanager", "jobmanager")
    churner = Probe(amqtt_broker, "observer", "observer-churner")
    stop_churning = threading.Event()

    def churn() -> None:  # new topic filters all the time: amqtt's dict grows under it
        index = 0
        while not stop_churning.is_set():
            churner.client.subscribe(rel(f"events/churn/{index}/#"), qos=1)
            index += 1
    churning = threading.Thread(target=churn, daemon=True)
    churning.start()
    try:
        for number in range(MESSAGES):
            writer.client.publish(topic, str(number).encode(), qos=1)
        for reader in readers:
            with contextlib.suppress(AssertionError):  # counted below, lost ones named
                reader.wait_for(topic, str(MESSAGES - 1).encode(), timeout=10)
    finally:
        stop_churning.set()
        churning.join(5)
        for probe in (first, *readers, writer, churner):
            probe.close()
    for reader in readers:
        got = sorted(int(payload) for seen, payload, _ in reader.seen if seen == topic)
        assert got == list(range(MESSAGES)), f"{MESSAGES - len(set(got))} lost"
