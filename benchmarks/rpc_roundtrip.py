"""Round trip and throughput: bare paho against clusterdeck's RPC, on each broker.

For each broker kind (a broker started as a real process) in one run:

(a) bare paho request/reply: this process publishes a 200-byte request (QoS 1), a peer
    process echoes it on a reply topic from its network thread; TCP_NODELAY on both
    clients (clusterdeck.broker.client.make_client).
(b) the same through the runtime: ``Gateway.ask(Echo)`` from an MqttRpcService here to
    an RpcEndpoint on an MqttRpcService in the peer process.
(c) throughput: QoS 1 messages/s arriving at the peer, from the first send until the last
    arrival, bare paho and through ``Gateway.tell``.

(a) and (b) alternate in rounds so that load from other work on the machine falls on
both alike. A last table times the runtime's own work without a broker: the codec, and
an ask through LocalRpcService (codec + mailbox + threads, no network).

    python -m benchmarks.rpc_roundtrip [--quick] [--kinds mosquitto amqtt] [--profile]
"""

from __future__ import annotations

import argparse
import json
import pstats
import queue
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    Children,
    LoadMeter,
    RunningBroker,
    exit_on_sigterm,
    fresh_home,
    kinds_to_run,
    machine_summary,
    markdown_table,
    percentile,
    python_module,
    start_broker,
)
from benchmarks._peer import (
    ECHO_ENDPOINT,
    PROFILE_TOPIC,
    Echo,
    EchoEndpoint,
    Flood,
    FloodCount,
    FloodQuery,
    bare_topics,
)
from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.client import connect_and_wait, make_client
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node.service import connect_service
from clusterdeck.core.rpc import Envelope, Gateway, LocalBus, LocalRpcService, decode, encode
from clusterdeck.core.rpc.mqtt import MqttRpcService

PAYLOAD_BYTES = 200
PAD = "x" * PAYLOAD_BYTES


@dataclass(frozen=True)
class Settings:
    requests: int
    warmup: int
    rounds: int
    flood: int
    local_asks: int

    @classmethod
    def full(cls) -> Settings:
        return cls(requests=2000, warmup=300, rounds=5, flood=20000, local_asks=5000)

    @classmethod
    def quick(cls) -> Settings:
        return cls(requests=300, warmup=50, rounds=3, flood=2000, local_asks=1000)


@dataclass
class BrokerResult:
    kind: str
    broker_startup_s: float
    bare_ms: list[float] = field(default_factory=list)
    rpc_ms: list[float] = field(default_factory=list)
    latency_load: str = ""
    flood: dict[str, FloodResult] = field(default_factory=dict)


@dataclass(frozen=True)
class FloodResult:
    sent: int
    delivered: int
    send_s: float
    receive_s: float
    load: str

    @property
    def rate(self) -> float:
        return self.delivered / self.receive_s if self.receive_s > 0 else 0.0


# -- (a) bare paho -----------------------------------------------------------------------------


class BareClient:
    """This side of the bare paho measurement: one client, replies handed over in a queue."""

    def __init__(self, address: BrokerAddress, cluster_id: str) -> None:
        self.topics = bare_topics(cluster_id)
        self._replies: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._subscribed = threading.Event()
        self._client = make_client(address, f"{cluster_id}.bench-paho-asker")
        self._client.on_connect = lambda c, *_: c.subscribe(self.topics["reply"], qos=1)
        self._client.on_subscribe = lambda *_: self._subscribed.set()
        self._client.on_message = lambda _c, _u, msg: self._replies.put(msg.payload)
        connect_and_wait(self._client, address, 10.0)
        if not self._subscribed.wait(10.0):
            raise TimeoutError("no SUBACK for the reply topic")

    def round_trip_ms(self, seq: int) -> float:
        tag = seq.to_bytes(8, "big")
        payload = tag + PAD[8:].encode()
        started = time.perf_counter_ns()
        self._client.publish(self.topics["req"], payload, qos=1)
        while self._replies.get(timeout=10.0)[:8] != tag:
            pass
        return (time.perf_counter_ns() - started) / 1e6

    def flood(self, count: int, deadline_s: float) -> FloodResult:
        meter = LoadMeter()
        payload = PAD.encode()
        started = time.monotonic()
        for _ in range(count):
            self._client.publish(self.topics["flood"], payload, qos=1)
        sent = time.monotonic()
        # The query waits behind the flood: give it the whole deadline.
        answer = _wait_for_flood(lambda: self._query(b"count", deadline_s), count,
                                 deadline_s)
        self._query(b"reset", deadline_s)
        return FloodResult(count, answer.count, sent - started,
                           answer.last - started if answer.count else 0.0,
                           meter.stop().describe())

    def _query(self, what: bytes, timeout: float) -> FloodCount:
        self._client.publish(self.topics["query"], what, qos=1)
        while True:
            reply = self._replies.get(timeout=timeout)
            if reply[:1] == b"Q":
                return FloodCount(**json.loads(reply[1:]))

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


# -- (b) and (c) through the runtime -----------------------------------------------------------


class RuntimeClient:
    """This side of the runtime measurement: an MqttRpcService and a Gateway to the echo."""

    def __init__(self, address: BrokerAddress, cluster_id: str) -> None:
        self.service: MqttRpcService = connect_service(
            Config({"cluster.id": cluster_id}), "client", "bench-asker", address,
            with_presence=False)
        self.echo = self.service.gateway(Gateway, ECHO_ENDPOINT)
        self._wait_until_answered()

    def _wait_until_answered(self, timeout: float = 30.0) -> None:
        """The peer subscribes without waiting for its SUBACK: ask until it answers."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.echo.ask(Echo("ping"), timeout=0.5).result()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise

    def round_trip_ms(self, seq: int) -> float:
        request = Echo(f"{seq:08d}{PAD[8:]}")
        started = time.perf_counter_ns()
        answer = self.echo.ask(request).result()
        elapsed = (time.perf_counter_ns() - started) / 1e6
        if answer != request:
            raise AssertionError(f"the echo answered {answer!r}")
        return elapsed

    def flood(self, count: int, deadline_s: float) -> FloodResult:
        meter = LoadMeter()
        started = time.monotonic()
        for seq in range(count):
            self.echo.tell(Flood(seq, PAD))
        sent = time.monotonic()
        # The query waits in the same FIFO as the flood: give it the whole deadline.
        answer = _wait_for_flood(
            lambda: self.echo.ask(FloodQuery(), timeout=deadline_s).result(), count,
            deadline_s)
        self.echo.ask(FloodQuery(reset=True), timeout=deadline_s).result()
        return FloodResult(count, answer.count, sent - started,
                           answer.last - started if answer.count else 0.0,
                           meter.stop().describe())

    def close(self) -> None:
        self.service.close()


def _wait_for_flood(query: Any, expected: int, deadline_s: float) -> FloodCount:
    """Poll until every message arrived, or the count stops growing for 10 s (lost ones)."""
    deadline = time.monotonic() + deadline_s
    last_progress, seen = time.monotonic(), -1
    while True:
        answer = query()
        if answer.count >= expected:
            return answer
        now = time.monotonic()
        if answer.count != seen:
            seen, last_progress = answer.count, now
        if now > deadline or now - last_progress > 10.0:
            return answer
        time.sleep(0.05)


# -- one broker --------------------------------------------------------------------------------


def start_peer(children: Children, kind: str, cluster_id: str,
               profile: Path | None = None) -> subprocess.Popen[bytes]:
    extra = ["--profile", str(profile)] if profile else []
    process = children.start(f"peer-{kind}-{cluster_id}", python_module(
        "benchmarks._peer", kind, "--cluster-id", cluster_id, *extra), stdout=subprocess.PIPE)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 60.0)
    if not ready or process.stdout.readline().strip() != b"ready":
        raise RuntimeError(f"the {kind} peer did not get ready; see {children.log_dir}")
    return process


def measure(children: Children, kind: str, settings: Settings,
            profile_dir: Path | None) -> BrokerResult:
    cluster_id = f"bench-rpc-{kind}"
    broker: RunningBroker = start_broker(children, kind, cluster_id)
    result = BrokerResult(kind, broker.startup_s)
    profile = profile_dir / f"peer-{kind}" if profile_dir else None
    bare_peer = start_peer(children, "paho", cluster_id)
    rpc_peer = start_peer(children, "rpc", cluster_id, profile)
    bare = BareClient(broker.address(), cluster_id)
    runtime = RuntimeClient(broker.address(), cluster_id)
    try:
        for seq in range(settings.warmup):
            bare.round_trip_ms(seq)
            runtime.round_trip_ms(seq)
        if profile is not None:
            runtime.service.publish(PROFILE_TOPIC, FloodQuery())
        meter = LoadMeter()
        block = settings.requests // settings.rounds
        for round_index in range(settings.rounds):
            base = round_index * block
            result.bare_ms += [bare.round_trip_ms(base + i) for i in range(block)]
            result.rpc_ms += [runtime.round_trip_ms(base + i) for i in range(block)]
        result.latency_load = meter.stop().describe()
        deadline = max(120.0, settings.flood / 200)
        result.flood["bare paho"] = bare.flood(settings.flood, deadline)
        result.flood["runtime tell"] = runtime.flood(settings.flood, deadline)
    finally:
        runtime.close()
        bare.close()
        children.stop(rpc_peer)
        children.stop(bare_peer)
        children.stop(broker.process)
    if profile is not None:
        _print_profiles(kind, profile)
    return result


def _print_profiles(kind: str, prefix: Path) -> None:
    for thread in ("endpoint", "network"):
        path = Path(f"{prefix}.{thread}")
        if path.exists():
            print(f"\n### cProfile of the echo peer's {thread} thread on {kind} "
                  f"(top 15 by own time)\n```")
            pstats.Stats(str(path)).sort_stats("tottime").print_stats(15)
            print("```")


# -- the runtime's own work, no broker ----------------------------------------------------------


def local_costs(settings: Settings) -> list[tuple[str, float]]:
    """Microseconds per round trip of the runtime's pieces, measured in this process."""
    request = Echo(PAD)
    ask = Envelope("ask", "bench-asker", request, correlation_id="bench-asker:1",
                   reply_to="bench-asker")
    reply = Envelope("reply", "bench-rpc-peer", request, correlation_id="bench-asker:1")
    framesize = 256 * 1024
    ask_data, reply_data = encode(ask, framesize), encode(reply, framesize)
    rows = [
        ("encode ask + reply", _per_call_us(lambda: (encode(ask, framesize),
                                                      encode(reply, framesize)))),
        ("decode ask + reply", _per_call_us(lambda: (decode(ask_data, framesize),
                                                      decode(reply_data, framesize)))),
    ]
    rows.append(("two thread hand-offs (a ping-pong through SimpleQueues), p50",
                 _thread_ping_pong_us(settings.local_asks)))
    bus = LocalBus()
    host = LocalRpcService(bus, "bench-local-host")
    asker = LocalRpcService(bus, "bench-local-asker")
    host.start_endpoint(EchoEndpoint(None))
    gateway = asker.gateway(Gateway, ECHO_ENDPOINT)
    try:
        for _ in range(200):
            gateway.ask(request).result()
        samples = []
        for _ in range(settings.local_asks):
            started = time.perf_counter_ns()
            gateway.ask(request).result()
            samples.append((time.perf_counter_ns() - started) / 1e3)
        rows.append(("LocalRpcService ask (codec + mailbox + threads), p50",
                     percentile(samples, 0.5)))
        rows.append(("LocalRpcService ask, p99", percentile(samples, 0.99)))
    finally:
        asker.close()
        host.close()
    return rows


def _thread_ping_pong_us(count: int) -> float:
    """The floor under any design that hands a message to another thread and back."""
    there: queue.SimpleQueue[object] = queue.SimpleQueue()
    back: queue.SimpleQueue[object] = queue.SimpleQueue()

    def echo() -> None:
        while (item := there.get()) is not None:
            back.put(item)
    thread = threading.Thread(target=echo, name="bench-ping-pong", daemon=True)
    thread.start()
    samples = []
    for index in range(count):
        started = time.perf_counter_ns()
        there.put(index)
        back.get()
        samples.append((time.perf_counter_ns() - started) / 1e3)
    there.put(None)
    thread.join()
    return percentile(samples, 0.5)


def _per_call_us(fn: Any, repeat: int = 5, number: int = 2000) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter_ns()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter_ns() - started) / number / 1e3)
    return best


# -- report ------------------------------------------------------------------------------------


def report(results: list[BrokerResult], local: list[tuple[str, float]],
           settings: Settings) -> str:
    latency_rows = []
    for r in results:
        a50, a99 = percentile(r.bare_ms, 0.5), percentile(r.bare_ms, 0.99)
        b50, b99 = percentile(r.rpc_ms, 0.5), percentile(r.rpc_ms, 0.99)
        over = 100 * (b50 - a50) / a50
        latency_rows.append((r.kind, f"{a50:.3f} / {a99:.3f}", f"{b50:.3f} / {b99:.3f}",
                             f"+{b50 - a50:.3f} ms ({over:+.0f}%)",
                             "met" if over < 30 else "missed", r.latency_load))
    flood_rows = []
    for r in results:
        for path, f in r.flood.items():
            flood_rows.append((r.kind, path, f"{f.delivered}/{f.sent}", f"{f.send_s:.2f}",
                               f"{f.receive_s:.2f}", f"{f.rate:,.0f}", f.load))
    lines = [
        f"Machine: {machine_summary()}.",
        f"{settings.requests} round trips per path after {settings.warmup} of warm-up, in "
        f"{settings.rounds} alternating rounds; {PAYLOAD_BYTES}-byte payloads, QoS 1.",
        "",
        markdown_table(["broker", "(a) bare paho p50 / p99 ms", "(b) runtime ask p50 / p99 ms",
                        "(b) over (a) at p50", "target < 30%", "CPU busy / load"],
                       latency_rows),
        "",
        markdown_table(["broker", "(c) path", "delivered", "send s", "all arrived s",
                        "msg/s", "CPU busy / load"], flood_rows),
        "",
        markdown_table(["runtime work without a broker", "µs"],
                       [(name, f"{value:.1f}") for name, value in local]),
        "",
        "Broker start (process start to first accepted login): " + ", ".join(
            f"{r.kind} {r.broker_startup_s:.2f} s" for r in results) + ".",
        "CPU busy: the whole machine's CPU use during the measurement (this benchmark "
        "included), percent of both cores; load: the 1-minute load average.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rpc_roundtrip",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests and messages")
    parser.add_argument("--kinds", nargs="+", choices=["mosquitto", "amqtt"],
                        help="broker kinds (default: both)")
    parser.add_argument("--profile", action="store_true",
                        help="run the echo peer under cProfile and print where it spends time")
    args = parser.parse_args(argv)
    settings = Settings.quick() if args.quick else Settings.full()
    exit_on_sigterm()
    with fresh_home() as home, Children(home / "logs") as children:
        profile_dir = home / "profiles" if args.profile else None
        if profile_dir:
            profile_dir.mkdir()
        results = [measure(children, kind, settings, profile_dir)
                   for kind in kinds_to_run(args.kinds)]
    print(report(results, local_costs(settings), settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
