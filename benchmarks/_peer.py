"""The far side of rpc_roundtrip, in a process of its own.

``python -m benchmarks._peer paho --cluster-id ID``: a bare paho client that echoes every
request on the reply topic (from its network thread, nothing in between) and counts the
flood. ``... rpc --cluster-id ID``: an RpcEndpoint on an MqttRpcService built the way
every clusterdeck process builds one
(``clusterdeck.core.node.service.connect_service``), answering Echo asks and counting
Flood tells on its main thread.

Prints ``ready`` on stdout once it can answer; runs until SIGTERM. With ``--profile
FILE`` the endpoint's main thread and paho's network thread run under cProfile and their
statistics are written to FILE.<thread> on exit.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdeck.broker.client import connect_and_wait, make_client
from clusterdeck.broker.connection import client_address
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node.service import connect_service
from clusterdeck.core.rpc import RpcEndpoint, handler, message

ECHO_ENDPOINT = "bench-echo"
# An answer completes an ask only from the asked endpoint's host, and the cluster's
# layout (core/protocol/topics.py) has the JobManager host every endpoint but the
# TaskExecutors: the echo speaks as the JobManager, whose login it has anyway.
RPC_PEER_SERVICE = "jobmanager"
PROFILE_TOPIC = "bench/profile"


# -- the messages of the RPC benchmark ---------------------------------------------------------


@message
@dataclass(frozen=True)
class Echo:
    payload: str


@message
@dataclass(frozen=True)
class Flood:
    seq: int
    payload: str = ""


@message
@dataclass(frozen=True)
class FloodQuery:
    reset: bool = False


@message
@dataclass(frozen=True)
class FloodCount:
    count: int
    first: float
    last: float


class FloodCounter:
    """Arrivals of the flood: how many, and when the first and the last came (monotonic
    seconds, comparable across processes of one Linux machine)."""

    def __init__(self) -> None:
        self.count = 0
        self.first = 0.0
        self.last = 0.0

    def arrived(self) -> None:
        now = time.monotonic()
        if self.count == 0:
            self.first = now
        self.count += 1
        self.last = now

    def reset(self) -> None:
        self.count, self.first, self.last = 0, 0.0, 0.0


# -- bare paho ---------------------------------------------------------------------------------


def bare_topics(cluster_id: str) -> dict[str, str]:
    base = f"clusterdeck/{cluster_id}/bench"
    return {name: f"{base}/{name}" for name in ("req", "reply", "flood", "query")}


def run_paho_peer(cluster_id: str) -> None:
    topics = bare_topics(cluster_id)
    address = client_address(paths.cluster_dir(cluster_id), cluster_id, "jobmanager")
    client = make_client(address, f"{cluster_id}.bench-paho-peer")
    counter = FloodCounter()
    subscribed = threading.Event()

    def on_connect(c: Any, _userdata: Any, _flags: Any, reason: Any, _props: Any) -> None:
        if not reason.is_failure:
            c.subscribe([(topics["req"], 1), (topics["flood"], 1), (topics["query"], 1)])

    def on_subscribe(*_args: Any) -> None:
        subscribed.set()

    def on_message(c: Any, _userdata: Any, msg: Any) -> None:
        if msg.topic == topics["req"]:
            c.publish(topics["reply"], msg.payload, qos=1)
        elif msg.topic == topics["flood"]:
            counter.arrived()
        elif msg.topic == topics["query"]:
            answer = {"count": counter.count, "first": counter.first, "last": counter.last}
            if msg.payload == b"reset":
                counter.reset()
            c.publish(topics["reply"], b"Q" + json.dumps(answer).encode(), qos=1)

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    connect_and_wait(client, address, 10.0)
    if not subscribed.wait(10.0):
        raise SystemExit("the broker did not confirm the subscription")
    try:
        _ready_then_wait()
    finally:
        client.disconnect()
        client.loop_stop()


# -- through the runtime -----------------------------------------------------------------------


class EchoEndpoint(RpcEndpoint):
    """Answers Echo asks with the same message; counts Flood tells."""

    def __init__(self, profiles: ThreadProfiles | None) -> None:
        super().__init__(ECHO_ENDPOINT)
        self.flood = FloodCounter()
        self._profiles = profiles

    def on_start(self) -> None:
        """Main thread: the place to start profiling it."""
        if self._profiles is not None:
            self._profiles.enable_here("endpoint")

    @handler(Echo)
    def echo(self, request: Echo) -> Echo:
        return request

    @handler(Flood)
    def count(self, _tell: Flood) -> None:
        self.flood.arrived()

    @handler(FloodQuery)
    def query(self, query: FloodQuery) -> FloodCount:
        answer = FloodCount(self.flood.count, self.flood.first, self.flood.last)
        if query.reset:
            self.flood.reset()
        return answer


class ThreadProfiles:
    """One cProfile per thread (cProfile sees only the thread that enabled it); written
    out once those threads have ended."""

    def __init__(self) -> None:
        self._profiles: dict[str, cProfile.Profile] = {}
        self._lock = threading.Lock()

    def enable_here(self, name: str) -> None:
        with self._lock:
            if name in self._profiles:
                return
            profile = self._profiles[name] = cProfile.Profile()
        profile.enable()

    def dump(self, prefix: Path) -> None:
        with self._lock:
            for name, profile in self._profiles.items():
                profile.dump_stats(f"{prefix}.{name}")


def run_rpc_peer(cluster_id: str, profile: Path | None) -> None:
    address = client_address(paths.cluster_dir(cluster_id), cluster_id, "jobmanager")
    service = connect_service(Config({"cluster.id": cluster_id}), "taskmanager",
                              RPC_PEER_SERVICE, address)
    profiles = ThreadProfiles() if profile else None
    if profiles is not None:
        # An event callback runs on paho's network thread: the way to profile that thread.
        service.subscribe(PROFILE_TOPIC, lambda *_: profiles.enable_here("network"))
    service.start_endpoint(EchoEndpoint(profiles))
    try:
        _ready_then_wait()
    finally:
        service.close()
        if profiles is not None and profile is not None:
            profiles.dump(profile)


def _ready_then_wait() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("ready", flush=True)
    while not stop.wait(1.0):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._peer")
    parser.add_argument("kind", choices=["paho", "rpc"])
    parser.add_argument("--cluster-id", required=True)
    parser.add_argument("--profile", type=Path, help="write cProfile statistics here")
    args = parser.parse_args(argv)
    if args.kind == "paho":
        run_paho_peer(args.cluster_id)
    else:
        run_rpc_peer(args.cluster_id, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
