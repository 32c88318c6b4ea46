"""What every clusterdeck process does the same way: logging, its broker connection with
presence and last will, and waiting for SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from pathlib import Path

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.connection import client_address
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node.brokeroutage import BrokerOutage
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.rpc.mqtt import BrokerUnreachableError, MqttRpcService

log = logging.getLogger(__name__)


def setup_logging(role: str) -> None:
    """The process log at CLUSTERDECK_LOG_LEVEL (INFO); its handler has that level too, so
    loggers set lower for a handler of their own (a TaskManager's attempt logs) do not
    reach it."""
    level = os.environ.get("CLUSTERDECK_LOG_LEVEL", "INFO")
    logging.basicConfig(level=level,
                        format=f"%(asctime)s %(levelname)s {role} %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.setLevel(level)


def broker_address(config: Config, role: str,
                   broker_url: str | BrokerAddress | None = None,
                   name: str | None = None) -> BrokerAddress:
    """``--broker`` (or ``broker.url``) when given, else the local cluster's broker with the
    credentials of ``role`` (a TaskManager's own: ``name``) from the data dir. An address
    already read (from a ``--credentials`` file, which carries the login and the CA) is
    used as it is."""
    if isinstance(broker_url, BrokerAddress):
        return broker_url
    url = broker_url or (config["broker.url"] if config["broker.kind"] == "external" else "")
    if url:
        return BrokerAddress.parse(url)
    cluster_id = config["cluster.id"]
    return client_address(paths.cluster_dir(cluster_id), cluster_id, role, name)


def connect_service(config: Config, role: str, service_id: str, address: BrokerAddress,
                    *, connect_timeout: float = 30.0, with_presence: bool = True,
                    identity: str | None = None) -> MqttRpcService:
    """Connect with presence; keep trying until ``connect_timeout`` while the broker is not
    up yet (the supervisor may be restarting it), fail at once on refused credentials."""
    instance_id = uuid.uuid4().hex
    online = offline = None
    if with_presence:
        online, offline = (p.Presence(service_id, role, status, instance_id, os.getpid(),
                                      socket.gethostname(), time.time())
                           for status in (p.PresenceStatus.ONLINE, p.PresenceStatus.OFFLINE))
    deadline = time.monotonic() + connect_timeout
    while True:
        service = MqttRpcService(address, topics.layout(config["cluster.id"]), service_id,
                                 online=online, offline=offline, identity=identity,
                                 ask_timeout=config["rpc.ask-timeout"],
                                 framesize=config["rpc.framesize"])
        service.instance_id = instance_id
        try:
            return service.connect(timeout=min(5.0, connect_timeout))
        except BrokerUnreachableError as error:
            service.close()
            refused = "authoriz" in str(error).lower() or "password" in str(error).lower()
            if refused:
                raise BrokerUnreachableError(f"the broker refused the {role} login: {error}"
                                             ) from None
            if time.monotonic() > deadline:
                raise
            log.info("broker not reachable yet (%s); retrying", error)
            time.sleep(0.2)


def wait_for_termination(service: MqttRpcService | None = None,
                         reconnect_timeout: float = 0.0, *,
                         keep_reconnecting: bool = False,
                         stop: threading.Event | None = None) -> bool:
    """Block the main thread until SIGTERM or SIGINT, or until ``service``'s broker
    connection has stayed broken for ``reconnect_timeout`` seconds (0: never); True then.
    A process that serves no one would otherwise look alive to its supervisor. With
    ``keep_reconnecting`` (nothing would start the process again) it waits on through
    any outage its network thread reconnects from (core/node/brokeroutage.py). ``stop``:
    an event another thread may set to end the wait at once (a lost leadership)."""
    stop = stop or threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    outage = BrokerOutage(reconnect_timeout if service is not None else 0.0,
                          keep_reconnecting)
    while not stop.wait(0.5):
        if service is not None and outage.should_exit(
                time.monotonic(), service.is_serving, service.is_reconnecting):
            return True
    return False


def run_dir(cluster_id: str) -> Path:
    return paths.cluster_dir(cluster_id) / "run"
