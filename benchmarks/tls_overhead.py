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
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    Children,
    exit_on_sigterm,
    fresh_home,
    kinds_to_run,
    machine_summary,
    start_broker,
)
from benchmarks._sidebyside import KindResult, Side, measure, tables
from benchmarks.rpc_roundtrip import (
    PAYLOAD_BYTES,
    BareClient,
    RuntimeClient,
    Settings,
    start_peer,
)

TRANSPORTS = ("plain", "tls")


def _connect(children: Children, kind: str, name: str) -> Side:
    cluster_id = f"bench-tls-{kind}-{name}"
    settings = ["broker.tls=on"] if name == "tls" else ["broker.tls=off"]
    broker = start_broker(children, kind, cluster_id, settings=settings)
    if broker.address().tls != (name == "tls"):
        raise RuntimeError(f"the {name} broker of {kind} did not come up as {name}")
    start_peer(children, "paho", cluster_id)
    start_peer(children, "rpc", cluster_id)
    return Side(name, BareClient(broker.address(), cluster_id),
                RuntimeClient(broker.address(), cluster_id))


def report(results: list[KindResult], settings: Settings) -> str:
    return "\n".join([
        f"Machine: {machine_summary()}.",
        f"{settings.requests} round trips per path and transport after {settings.warmup} of "
        f"warm-up, in {settings.rounds} alternating rounds; {PAYLOAD_BYTES}-byte payloads, "
        "QoS 1; loopback.",
        "",
        tables(results, TRANSPORTS, ("plain TCP", "TLS")),
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
        results = [measure(children, kind, TRANSPORTS,
                           lambda name, kind=kind: _connect(children, kind, name), settings)
                   for kind in kinds_to_run(args.kinds)]
    print(report(results, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
