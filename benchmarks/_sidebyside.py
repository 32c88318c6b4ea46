"""Two brokers of one kind measured side by side, as A against B: what a broker feature
costs (TLS in tls_overhead, ACLs in acl_overhead).

Each side is a broker with the echo peers of ``rpc_roundtrip`` and this side's clients.
In one run: (a) bare paho request/reply and (b) ``Gateway.ask(Echo)`` round trips,
alternating the sides in rounds so that load from other work on the machine falls on
both alike; then (c) tell throughput, A then B.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks._harness import Children, LoadMeter, markdown_table, percentile
from benchmarks.rpc_roundtrip import BareClient, FloodResult, RuntimeClient, Settings


@dataclass
class Side:
    """One broker of one kind, with its peers and this side's clients."""

    name: str
    bare: BareClient
    runtime: RuntimeClient
    bare_ms: list[float] = field(default_factory=list)
    rpc_ms: list[float] = field(default_factory=list)
    tell: FloodResult | None = None


@dataclass
class KindResult:
    kind: str
    sides: dict[str, Side]
    latency_load: str = ""


def measure(children: Children, kind: str, names: tuple[str, str],
            connect: Callable[[str], Side], settings: Settings) -> KindResult:
    """Connect both sides (``connect(name)``), measure them, stop every child."""
    sides: dict[str, Side] = {}
    try:
        for name in names:
            sides[name] = connect(name)
        result = KindResult(kind, sides)
        for seq in range(settings.warmup):
            for side in sides.values():
                side.bare.round_trip_ms(seq)
                side.runtime.round_trip_ms(seq)
        meter = LoadMeter()
        block = settings.requests // settings.rounds
        for round_index in range(settings.rounds):
            base = round_index * block
            for side in sides.values():
                side.bare_ms += [side.bare.round_trip_ms(base + i) for i in range(block)]
                side.rpc_ms += [side.runtime.round_trip_ms(base + i) for i in range(block)]
        result.latency_load = meter.stop().describe()
        deadline = max(120.0, settings.flood / 200)
        for side in sides.values():
            side.tell = side.runtime.flood(settings.flood, deadline)
    finally:
        for side in sides.values():
            side.runtime.close()
            side.bare.close()
        children.stop_all()
    return result


def _p(values: list[float]) -> str:
    return f"{percentile(values, 0.5):.3f} / {percentile(values, 0.99):.3f}"


def tables(results: list[KindResult], names: tuple[str, str],
           labels: tuple[str, str]) -> str:
    """The latency table (B over A at p50) and the throughput table (B against A)."""
    latency_rows, tell_rows = [], []
    for r in results:
        a, b = (r.sides[name] for name in names)
        for path, first, second in (("(a) bare paho", a.bare_ms, b.bare_ms),
                                    ("(b) runtime ask", a.rpc_ms, b.rpc_ms)):
            delta = percentile(second, 0.5) - percentile(first, 0.5)
            latency_rows.append((r.kind, path, _p(first), _p(second),
                                 f"{delta:+.3f} ms "
                                 f"({100 * delta / percentile(first, 0.5):+.0f}%)",
                                 r.latency_load))
        for side, label in ((a, labels[0]), (b, labels[1])):
            assert side.tell is not None
            tell_rows.append((r.kind, label, f"{side.tell.delivered}/{side.tell.sent}",
                              f"{side.tell.rate:,.0f}", side.tell.load))
        if a.tell is not None and b.tell is not None and a.tell.rate > 0:
            change = 100 * (b.tell.rate - a.tell.rate) / a.tell.rate
            tell_rows.append((r.kind, f"{labels[1]} against {labels[0]}", "",
                              f"{change:+.0f}%", ""))
    return "\n".join([
        markdown_table(["broker", "path", f"{labels[0]} p50 / p99 ms",
                        f"{labels[1]} p50 / p99 ms", f"{labels[1]} over {labels[0]} at p50",
                        "CPU busy / load"], latency_rows),
        "",
        markdown_table(["broker", "(c) runtime tell over", "delivered", "msg/s",
                        "CPU busy / load"], tell_rows),
    ])
