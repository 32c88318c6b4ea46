"""Which data plane for streaming exchanges: a credit-based channel against the MQTT broker.

Streaming tasks exchange records in buffers. This measures 32 KiB buffers from a producer
process (a child, as a producing TaskManager) to this process (the consumer, whose main
thread takes them as a task would), over:

- ``channel``: clusterdeck's streaming channel (core/streaming/network/), plain TCP on
  loopback: a ChannelServer and ResultPartitionWriter there, an InputGate here;
- ``channel tls``: the same with TLS and the pinned self-signed certificate;
- ``mqtt qos 0`` and ``mqtt qos 1``: a plain paho client publishing on a topic of a
  Mosquitto broker (started as the cluster starts one), a paho client here subscribed to
  it, each message handed to this main thread through a queue.

Each run has two phases: a **flood** of ``--count`` buffers as fast as the producer can
(throughput: MB/s and buffers/s from the first arrival to the last; what arrived of what
was sent), then ``--paced`` buffers at ``--rate`` a second (latency: from the send, stamped
in the buffer, to the consumer's main thread taking it; CLOCK_MONOTONIC is one clock for
all processes of a Linux machine). The producer's peak RSS says what it buffered.

    python -m benchmarks.stream_exchange [--count 3000] [--paced 1000] [--rate 500]
        [--rounds 2] [--kinds channel "channel tls" "mqtt qos 0" "mqtt qos 1"]
"""

from __future__ import annotations

import argparse
import json
import queue
import resource
import select
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    Children,
    LoadMeter,
    exit_on_sigterm,
    fresh_home,
    machine_summary,
    markdown_table,
    percentile,
    python_module,
    start_broker,
)

BUFFER = 32 * 1024
STAMP = struct.Struct("!QQB")  # sequence number, send time (monotonic ns), phase
FLOOD, PACED, END = 0, 1, 2
KINDS = ("channel", "channel tls", "mqtt qos 0", "mqtt qos 1")
QUIET = 5.0  # seconds without an arrival after which an MQTT run counts the rest as lost


def stamped(seq: int, phase: int) -> bytes:
    head = STAMP.pack(seq, time.monotonic_ns(), phase)
    return head + bytes(BUFFER - len(head))


@dataclass(frozen=True)
class Plan:
    count: int
    paced: int
    rate: float


# -- the producer, in a child process ------------------------------------------------------


def produce(kind: str, plan: Plan, cluster_id: str, folder: str) -> None:
    """Child: announce where to connect (one JSON line), send both phases, report RSS."""
    if kind.startswith("channel"):
        send, done = _channel_producer(kind, folder)
    else:
        send, done = _mqtt_producer(kind, cluster_id)
    for seq in range(plan.count):
        send(stamped(seq, FLOOD))
    started = time.monotonic()
    for seq in range(plan.paced):
        time.sleep(max(0.0, started + seq / plan.rate - time.monotonic()))
        send(stamped(seq, PACED))
    done()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"max_rss_mib": round(peak, 1)}), flush=True)


def _channel_producer(kind: str, folder: str) -> tuple[Any, Any]:
    from clusterdeck.core.dataservice import capability, selfsigned
    from clusterdeck.core.streaming.network import ChannelServer, partition_capability

    key = capability.new_key()
    certificate = selfsigned.make(Path(folder), "127.0.0.1") if kind.endswith("tls") else None
    server = ChannelServer(key, certificate=certificate)
    address = server.start()
    writer = server.register("bench", 1)
    print(json.dumps({"host": address.host, "port": address.port,
                      "capability": partition_capability(key, "bench"),
                      "fingerprint": address.fingerprint}), flush=True)

    def done() -> None:
        writer.finish()
        deadline = time.monotonic() + 60.0
        while not writer.delivered and time.monotonic() < deadline:
            time.sleep(0.01)
        server.close()
    return (lambda payload: writer.emit(0, payload)), done


def _mqtt_topic(cluster_id: str) -> str:
    return f"clusterdeck/{cluster_id}/bench/stream"


def _mqtt_client(cluster_id: str, name: str) -> Any:
    from clusterdeck.broker.client import connect_and_wait, make_client
    from clusterdeck.broker.connection import client_address
    from clusterdeck.core.config import paths

    address = client_address(paths.cluster_dir(cluster_id), cluster_id, "jobmanager")
    client = make_client(address, f"{cluster_id}.bench-{name}")
    return client, lambda: connect_and_wait(client, address, 10.0)


def _mqtt_producer(kind: str, cluster_id: str) -> tuple[Any, Any]:
    qos = int(kind[-1])
    client, connect = _mqtt_client(cluster_id, "stream-producer")
    connect()
    topic = _mqtt_topic(cluster_id)
    print(json.dumps({"topic": topic}), flush=True)
    last: list[Any] = []

    def send(payload: bytes) -> None:
        last[:] = [client.publish(topic, payload, qos=qos)]

    def done() -> None:
        client.publish(topic, stamped(0, END), qos=qos).wait_for_publish(60.0)
        client.disconnect()
        client.loop_stop()
    return send, done


# -- the consumer, here ------------------------------------------------------------------------


@dataclass
class Run:
    kind: str
    sent: int
    arrived: int = 0
    flood_s: float = 0.0
    latency_ms: list[float] | None = None
    producer_rss_mib: float = 0.0
    load: str = ""

    @property
    def mb_per_s(self) -> float:
        return self.arrived * BUFFER / 1e6 / self.flood_s if self.flood_s else 0.0

    @property
    def buffers_per_s(self) -> float:
        return self.arrived / self.flood_s if self.flood_s else 0.0


class Arrivals:
    """What the consumer's main thread took: first and last flood arrival, latencies."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.first = self.last = 0.0
        self.latency_ms: list[float] = []

    def take(self, payload: bytes) -> bool:
        """False at the end marker."""
        now = time.monotonic_ns()
        _seq, sent, phase = STAMP.unpack_from(payload)
        if phase == FLOOD:
            self.first = self.first or now / 1e9
            self.last = now / 1e9
            self.run.arrived += 1
        elif phase == PACED:
            self.latency_ms.append((now - sent) / 1e6)
        return phase != END

    def finish(self) -> None:
        self.run.flood_s = self.last - self.first
        self.run.latency_ms = self.latency_ms


def start_producer(children: Children, kind: str, plan: Plan, cluster_id: str,
                   folder: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    process = children.start(f"producer-{kind.replace(' ', '-')}", python_module(
        "benchmarks.stream_exchange", "--produce", kind, "--count", str(plan.count),
        "--paced", str(plan.paced), "--rate", str(plan.rate), "--cluster-id", cluster_id,
        "--folder", str(folder)), stdout=subprocess.PIPE)
    return process, _line(process)


def _line(process: subprocess.Popen[bytes], timeout: float = 60.0) -> dict[str, Any]:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    if not ready:
        raise RuntimeError("the producer said nothing")
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"the producer exited with {process.wait()}")
    return dict(json.loads(line))


def consume_channel(children: Children, kind: str, plan: Plan, folder: Path) -> Run:
    from clusterdeck.core.streaming.network import BufferKind, InputGate, SubpartitionLocation

    run = Run(kind, plan.count)
    meter = LoadMeter()
    producer, where = start_producer(children, kind, plan, "-", folder)
    gate = InputGate([SubpartitionLocation(where["host"], where["port"], "bench", 0,
                                           where["capability"], where["fingerprint"])])
    arrivals = Arrivals(run)
    try:
        while True:
            item = gate.poll(60.0)
            if item is None:
                raise RuntimeError(f"{kind}: nothing for 60 s")
            if item.kind is BufferKind.END_OF_PARTITION:
                break
            arrivals.take(item.payload)
        run.producer_rss_mib = _line(producer)["max_rss_mib"]
    finally:
        gate.close()
        children.stop(producer)
    arrivals.finish()
    run.load = meter.stop().describe()
    return run


def consume_mqtt(children: Children, kind: str, plan: Plan, cluster_id: str,
                 folder: Path) -> Run:
    run = Run(kind, plan.count)
    meter = LoadMeter()
    client, connect = _mqtt_client(cluster_id, "stream-consumer")
    inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    subscribed = threading.Event()
    client.on_connect = lambda c, *_: c.subscribe(_mqtt_topic(cluster_id), qos=int(kind[-1]))
    client.on_subscribe = lambda *_: subscribed.set()
    client.on_message = lambda _c, _u, message: inbox.put(message.payload)
    connect()
    if not subscribed.wait(10.0):
        raise RuntimeError("no SUBACK")
    producer, _ = start_producer(children, kind, plan, cluster_id, folder)
    arrivals = Arrivals(run)
    try:
        while True:
            try:
                payload = inbox.get(timeout=QUIET if run.arrived else 60.0)
            except queue.Empty:
                break  # the end marker was lost (QoS 0): the rest counts as lost
            if not arrivals.take(payload):
                break
        run.producer_rss_mib = _line(producer)["max_rss_mib"]
    finally:
        client.disconnect()
        client.loop_stop()
        children.stop(producer)
    arrivals.finish()
    run.load = meter.stop().describe()
    return run


def report(runs: list[Run], plan: Plan) -> str:
    rows = []
    for run in runs:
        latency = run.latency_ms or []
        rows.append((run.kind, f"{run.arrived}/{run.sent}", f"{run.mb_per_s:,.0f}",
                     f"{run.buffers_per_s:,.0f}",
                     f"{percentile(latency, 0.5):.2f} / {percentile(latency, 0.99):.2f}",
                     f"{len(latency)}/{plan.paced}", f"{run.producer_rss_mib:.0f}", run.load))
    return "\n".join([
        f"Machine: {machine_summary()}.",
        f"{BUFFER // 1024} KiB buffers; flood of {plan.count}, then {plan.paced} paced at "
        f"{plan.rate:g}/s.",
        "",
        markdown_table(["data plane", "flood arrived", "MB/s", "buffers/s",
                        "paced latency p50 / p99 ms", "paced arrived", "producer peak RSS MiB",
                        "CPU busy / load"], rows),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stream_exchange",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--paced", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--produce", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--cluster-id", default="", help=argparse.SUPPRESS)
    parser.add_argument("--folder", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    plan = Plan(args.count, args.paced, args.rate)
    if args.produce:
        produce(args.produce, plan, args.cluster_id, args.folder)
        return 0
    exit_on_sigterm()
    runs: list[Run] = []
    with fresh_home() as home, Children(home / "logs") as children:
        cluster_id = "bench-stream"
        broker = (start_broker(children, "mosquitto", cluster_id)
                  if any(k.startswith("mqtt") for k in args.kinds) else None)
        for round_index in range(args.rounds):
            for kind in args.kinds:
                folder = home / f"tls-{round_index}-{kind.replace(' ', '-')}"
                runs.append(consume_channel(children, kind, plan, folder)
                            if kind.startswith("channel")
                            else consume_mqtt(children, kind, plan, cluster_id, folder))
                print(f"round {round_index + 1}: {kind} done", file=sys.stderr)
        if broker is not None:
            children.stop(broker.process)
    print(report(runs, plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
