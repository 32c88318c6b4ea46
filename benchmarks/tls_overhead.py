"""What TLS costs: round trip and tell throughput over TLS against plain TCP, on loopback.

For each broker kind, two brokers run side by side as real processes (``clusterdeck
broker``), one with ``broker.tls=on`` and one without, each with the echo peers of
``rpc_roundtrip``. In one run:

(a) bare paho request/reply and (b) ``Gateway.ask(Echo)`` through the runtime, 200-byte
    payloads at QoS 1, alternating plain and TLS in rounds so that load from other work
    on the machine falls on both alike;
(c) tell throughput: QoS 1 ``Gateway.tell`` messages/s arriving at the peer, plain, then
    TLS.

    python -m benchmarks.tls_overhead [--quick] [--kinds mosquitto amqtt]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    Children,
    LoadMeter,
    exit_on_sigterm,
    fresh_home,
    kinds_to_run,
    machine_summary,
    markdown_table,
    percentile,
    start_broker,
)
from benchmarks.rpc_roundtrip import (
    PAYLOAD_BYTES,
    BareClient,
    FloodResult,
    RuntimeClient,
    Settings,
    start_peer,
)

TRANSPORTS = ("plain", "tls")


@dataclass
class Transport:
    """One broker of one kind with its peers and this side's clients."""

    name: str
    bare: BareClient
    runtime: RuntimeClient
    bare_ms: list[float] = field(default_factory=list)
    rpc_ms: list[float] = field(default_factory=list)
    tell: FloodResult | None = None


@dataclass
class KindResult:
    kind: str
    transports: dict[str, Transport]
    latency_load: str = ""


def _connect(children: Children, kind: str, name: str) -> Transport:
    cluster_id = f"bench-tls-{kind}-{name}"
    settings = ["broker.tls=on"] if name == "tls" else ["broker.tls=off"]
    broker = start_broker(children, kind, cluster_id, settings=settings)
    if broker.address().tls != (name == "tls"):
        raise RuntimeError(f"the {name} broker of {kind} did not come up as {name}")
    start_peer(children, "paho", cluster_id)
    start_peer(children, "rpc", cluster_id)
    return Transport(name, BareClient(broker.address(), cluster_id),
                     RuntimeClient(broker.address(), cluster_id))


def measure(children: Children, kind: str, settings: Settings) -> KindResult:
    transports = {name: _connect(children, kind, name) for name in TRANSPORTS}
    result = KindResult(kind, transports)
    try:
        for seq in range(settings.warmup):
            for t in transports.values():
                t.bare.round_trip_ms(seq)
                t.runtime.round_trip_ms(seq)
        meter = LoadMeter()
        block = settings.requests // settings.rounds
        for round_index in range(settings.rounds):
            base = round_index * block
            for t in transports.values():
                t.bare_ms += [t.bare.round_trip_ms(base + i) for i in range(block)]
                t.rpc_ms += [t.runtime.round_trip_ms(base + i) for i in range(block)]
        result.latency_load = meter.stop().describe()
        deadline = max(120.0, settings.flood / 200)
        for t in transports.values():
            t.tell = t.runtime.flood(settings.flood, deadline)
    finally:
        for t in transports.values():
            t.runtime.close()
            t.bare.close()
        children.stop_all()
    return result


def _p(values: list[float]) -> str:
    return f"{percentile(values, 0.5):.3f} / {percentile(values, 0.99):.3f}"


def report(results: list[KindResult], settings: Settings) -> str:
    latency_rows, tell_rows = [], []
    for r in results:
        plain, tls = r.transports["plain"], r.transports["tls"]
        for path, a, b in (("(a) bare paho", plain.bare_ms, tls.bare_ms),
                           ("(b) runtime ask", plain.rpc_ms, tls.rpc_ms)):
            delta = percentile(b, 0.5) - percentile(a, 0.5)
            latency_rows.append((r.kind, path, _p(a), _p(b),
                                 f"{delta:+.3f} ms ({100 * delta / percentile(a, 0.5):+.0f}%)",
                                 r.latency_load))
        for t in (plain, tls):
            assert t.tell is not None
            tell_rows.append((r.kind, t.name, f"{t.tell.delivered}/{t.tell.sent}",
                              f"{t.tell.rate:,.0f}", t.tell.load))
    return "\n".join([
        f"Machine: {machine_summary()}.",
        f"{settings.requests} round trips per path and transport after {settings.warmup} of "
        f"warm-up, in {settings.rounds} alternating rounds; {PAYLOAD_BYTES}-byte payloads, "
        "QoS 1; loopback.",
        "",
        markdown_table(["broker", "path", "plain TCP p50 / p99 ms", "TLS p50 / p99 ms",
                        "TLS over plain at p50", "CPU busy / load"], latency_rows),
        "",
        markdown_table(["broker", "(c) runtime tell over", "delivered", "msg/s",
                        "CPU busy / load"], tell_rows),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tls_overhead",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests and messages")
    parser.add_argument("--kinds", nargs="+", choices=["mosquitto", "amqtt"],
                        help="broker kinds (default: both)")
    args = parser.parse_args(argv)
    settings = Settings.quick() if args.quick else Settings.full()
    exit_on_sigterm()
    with fresh_home() as home, Children(home / "logs") as children:
        results = [measure(children, kind, settings) for kind in kinds_to_run(args.kinds)]
    print(report(results, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
