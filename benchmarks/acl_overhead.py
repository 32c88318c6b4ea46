"""What the ACLs cost: round trip and tell throughput with the per-login ACLs on and off.

For each broker kind, two brokers run side by side as real processes with the same
logins, each with the echo peers of ``rpc_roundtrip``: one exactly as clusterdeck runs it
(``clusterdeck broker``: broker/acl.py's table enforced), one without any ACL. The
product has no switch that turns ACLs off, so the benchmark starts that one itself:

- Mosquitto: the files ``clusterdeck broker`` writes (``mosquitto.write_files``), the
  config's ``acl_file`` line taken out (Mosquitto then lets every login that got in do
  everything), and ``mosquitto -c`` on it;
- amqtt: ``embedded.broker_config`` without clusterdeck's topic ACL and last-will plugins
  (amqtt's password file plugin stays: logins are still checked), run by amqtt's own
  ``Broker`` in a child process (``--serve-amqtt-without-acl``).

Before measuring, a client login (which may only read ``state/``) publishes on
``state/leader``: the ACL-on broker must drop it and the ACL-off one deliver it, or the
benchmark stops. In one run:

(a) bare paho request/reply and (b) ``Gateway.ask(Echo)`` through the runtime, 200-byte
    payloads at QoS 1, alternating ACL off and on in rounds so that load from other work
    on the machine falls on both alike;
(c) tell throughput: QoS 1 ``Gateway.tell`` messages/s arriving at the peer, ACL off,
    then on.

Like ``rpc_roundtrip``, both sides use the jobmanager login (the benchmark's topics are
granted to no other role), so every message is checked against that login's rules, on
publish and again on delivery.

    python -m benchmarks.acl_overhead [--quick] [--kinds mosquitto amqtt]
"""

from __future__ import annotations

import argparse
import queue
import secrets
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
    RunningBroker,
    exit_on_sigterm,
    fresh_home,
    kinds_to_run,
    launch_broker,
    machine_summary,
    python_module,
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
from clusterdeck.broker import mosquitto
from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.client import connect_and_wait, make_client
from clusterdeck.broker.connection import write_connection
from clusterdeck.broker.credentials import Credentials, ensure_private_dir, load_or_create
from clusterdeck.broker.limits import BrokerLimits
from clusterdeck.broker.server import (
    BROKER_DIR_NAME,
    choose_port,
    listen_host,
    local_address,
)
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config, load

ACL_MODES = ("off", "on")
SERVE_FLAG = "--serve-amqtt-without-acl"
# clusterdeck's own amqtt plugins: the ACL on topics and the check of last wills.
_AMQTT_ACL_PLUGINS = ("clusterdeck.broker.amqttacl.ClusterTopicAcl",
                      "clusterdeck.broker.amqttacl.ClusterWillCheck")
# Plain TCP on both sides: TLS has a benchmark of its own (tls_overhead).
_BROKER_SETTINGS = {"broker.tls": "off"}


# -- a broker without ACLs ------------------------------------------------------------------


@dataclass(frozen=True)
class _Prepared:
    """What ``clusterdeck broker`` prepares before it runs the broker (broker/server.py)."""

    config: Config
    cluster_dir: Path
    broker_dir: Path
    credentials: Credentials
    bind: str
    address: BrokerAddress


def _prepare(kind: str, cluster_id: str) -> _Prepared:
    """``run_broker``'s preparation for ``cluster_id`` and ``kind``, TLS off."""
    config = load(overrides={"cluster.id": cluster_id, "broker.kind": kind,
                             **_BROKER_SETTINGS})
    cluster_dir = ensure_private_dir(paths.cluster_dir(cluster_id))
    broker_dir = ensure_private_dir(cluster_dir / BROKER_DIR_NAME)
    credentials = load_or_create(cluster_dir, cluster_id)
    address = local_address(config, cluster_dir, choose_port(config, cluster_dir))
    if address.tls:
        raise RuntimeError("the broker without ACLs came out with TLS on")
    return _Prepared(config, cluster_dir, broker_dir, credentials, listen_host(config),
                     address)


def _mosquitto_without_acl(children: Children, cluster_id: str) -> RunningBroker:
    """Mosquitto from the files ``clusterdeck broker`` writes, less its ``acl_file``."""
    binary = mosquitto.find_binary()
    if binary is None:
        raise RuntimeError("mosquitto is not installed")
    ready = _prepare("mosquitto", cluster_id)
    conf_file = mosquitto.write_files(ready.broker_dir, host=ready.bind,
                                      port=ready.address.port,
                                      credentials=ready.credentials,
                                      limits=BrokerLimits.from_config(ready.config))
    lines = conf_file.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith("acl_file ")]
    if len(kept) != len(lines) - 1:
        raise RuntimeError(f"expected one acl_file line in {conf_file}, found "
                           f"{len(lines) - len(kept)}")
    conf_file.write_text("".join(kept), encoding="utf-8")  # stays 0600
    (ready.broker_dir / mosquitto.ACL_NAME).unlink()
    write_connection(ready.cluster_dir, "mosquitto", ready.address)
    return launch_broker(children, "mosquitto", cluster_id, [str(binary), "-c", str(conf_file)])


def serve_amqtt_without_acl(cluster_id: str) -> int:
    """In the child: ``clusterdeck broker``'s amqtt (broker/server.py ``_run_amqtt``,
    broker/embedded.py ``run``) without clusterdeck's ACL plugins, on amqtt's own
    ``Broker`` rather than ``ClusterBroker`` (whose one change is an ACL check on
    retained messages). Until SIGTERM or SIGINT."""
    import asyncio
    import logging
    import signal

    from amqtt.broker import Broker

    from clusterdeck.broker import embedded

    ready = _prepare("amqtt", cluster_id)
    password_file = ready.broker_dir / embedded.PASSWORD_NAME
    embedded.write_password_file(password_file, ready.credentials)
    config = embedded.broker_config(host=ready.bind, port=ready.address.port,
                                    password_file=password_file,
                                    credentials=ready.credentials)
    for plugin in _AMQTT_ACL_PLUGINS:
        del config["plugins"][plugin]  # KeyError when embedded.py renamed one: look again
    if len(config["plugins"]) != 1:
        raise RuntimeError(f"unexpected amqtt plugins left: {sorted(config['plugins'])}")
    write_connection(ready.cluster_dir, "amqtt", ready.address)
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        broker = Broker(config)
        await broker.start()
        print(f"amqtt without ACLs listening on {config['listeners']['default']['bind']}",
              flush=True)
        try:
            await stop.wait()
        finally:
            await broker.shutdown()

    asyncio.run(main())
    return 0


def _amqtt_without_acl(children: Children, cluster_id: str) -> RunningBroker:
    return launch_broker(children, "amqtt", cluster_id, python_module(
        "benchmarks.acl_overhead", SERVE_FLAG, cluster_id))


def start_broker_without_acl(children: Children, kind: str, cluster_id: str
                             ) -> RunningBroker:
    if kind == "mosquitto":
        return _mosquitto_without_acl(children, cluster_id)
    return _amqtt_without_acl(children, cluster_id)


# -- is the ACL what we think it is ---------------------------------------------------------


def forged_leader_delivered(broker: RunningBroker, timeout: float = 10.0) -> bool:
    """Whether a client login's publish on ``state/leader`` (the jobmanager's alone to
    write, broker/acl.py) reaches a subscriber. Run before the peers start: nothing else
    listens there, and the message is not retained."""
    cluster_id = broker.cluster_id
    topic = f"clusterdeck/{cluster_id}/state/leader"
    forged, sentinel = (f"forged-{secrets.token_hex(8)}".encode(),
                        f"sentinel-{secrets.token_hex(8)}".encode())
    arrived: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    subscribed = threading.Event()
    watcher_address = broker.address("jobmanager")
    watcher = make_client(watcher_address, f"{cluster_id}.bench-acl-watcher")
    watcher.on_connect = lambda c, *_: c.subscribe(topic, qos=1)
    watcher.on_subscribe = lambda *_: subscribed.set()
    watcher.on_message = lambda _c, _u, msg: arrived.put(msg.payload)
    intruder_address = broker.address("client")
    intruder = make_client(intruder_address, f"{cluster_id}.bench-acl-intruder")
    clients: list[Any] = []
    try:
        connect_and_wait(watcher, watcher_address, timeout)
        clients.append(watcher)
        if not subscribed.wait(timeout):
            raise TimeoutError("no SUBACK for the watcher's subscription")
        connect_and_wait(intruder, intruder_address, timeout)
        clients.append(intruder)
        intruder.publish(topic, forged, qos=1).wait_for_publish(timeout)
        # PUBACKed, so the broker has routed or dropped it: the jobmanager's own message,
        # sent after, bounds the wait.
        watcher.publish(topic, sentinel, qos=1).wait_for_publish(timeout)
        seen: list[bytes] = []
        deadline = time.monotonic() + timeout
        while sentinel not in seen:
            seen.append(arrived.get(timeout=max(0.01, deadline - time.monotonic())))
        time.sleep(0.2)  # a straggler, should the broker not keep the order
        while not arrived.empty():
            seen.append(arrived.get())
        return forged in seen
    finally:
        for client in clients:
            client.disconnect()
            client.loop_stop()


# -- measuring -------------------------------------------------------------------------------


def _connect(children: Children, kind: str, acl: str) -> Side:
    cluster_id = f"bench-acl-{kind}-{acl}"
    if acl == "on":
        broker = start_broker(children, kind, cluster_id,
                              settings=[f"{k}={v}" for k, v in _BROKER_SETTINGS.items()])
    else:
        broker = start_broker_without_acl(children, kind, cluster_id)
    if broker.address().tls:
        raise RuntimeError(f"the ACL-{acl} broker of {kind} came up with TLS")
    if forged_leader_delivered(broker) != (acl == "off"):
        raise RuntimeError(f"the ACL-{acl} broker of {kind} "
                           f"{'dropped' if acl == 'off' else 'delivered'} a client login's "
                           "publish on state/leader: its ACL is not what this benchmark "
                           "compares")
    start_peer(children, "paho", cluster_id)
    start_peer(children, "rpc", cluster_id)
    return Side(acl, BareClient(broker.address(), cluster_id),
                RuntimeClient(broker.address(), cluster_id))


def report(results: list[KindResult], settings: Settings) -> str:
    return "\n".join([
        f"Machine: {machine_summary()}.",
        f"{settings.requests} round trips per path and broker after {settings.warmup} of "
        f"warm-up, in {settings.rounds} alternating rounds; {PAYLOAD_BYTES}-byte payloads, "
        "QoS 1; plain TCP on loopback; the jobmanager login on both sides.",
        "ACL on: the broker as clusterdeck runs it. ACL off: the same logins and limits, "
        "no topic ACL (checked before measuring: a client login's publish on "
        "state/leader is dropped with the ACL on and delivered with it off).",
        "",
        tables(results, ACL_MODES, ("ACL off", "ACL on")),
    ])


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == [SERVE_FLAG] and len(arguments) == 2:
        return serve_amqtt_without_acl(arguments[1])  # the child of _amqtt_without_acl
    parser = argparse.ArgumentParser(prog="python -m benchmarks.acl_overhead",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests and messages")
    parser.add_argument("--kinds", nargs="+", choices=["mosquitto", "amqtt"],
                        help="broker kinds (default: both)")
    args = parser.parse_args(arguments)
    settings = Settings.quick() if args.quick else Settings.full()
    exit_on_sigterm()
    with fresh_home() as home, Children(home / "logs") as children:
        results = [measure(children, kind, ACL_MODES,
                           lambda acl, kind=kind: _connect(children, kind, acl), settings)
                   for kind in kinds_to_run(args.kinds)]
    print(report(results, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
