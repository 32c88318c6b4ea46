"""The body of ``clusterdeck broker``: prepare the cluster's broker, then become it.

For Mosquitto this process execs into the broker, so the pid the supervisor watches
(and kills, for fault injection) is Mosquitto itself. amqtt has no binary of its own
and runs inside this process until SIGTERM or SIGINT.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from clusterdeck.broker import mosquitto
from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.client import (
    BrokerAuthError,
    BrokerConnectError,
    connect_and_wait,
    make_client,
)
from clusterdeck.broker.connection import read_connection, write_connection
from clusterdeck.broker.credentials import Credentials, ensure_private_dir, load_or_create
from clusterdeck.broker.limits import BrokerLimits

BROKER_DIR_NAME = "broker"


class BrokerStartError(RuntimeError):
    """The configured broker cannot be run by this process."""


def resolve_kind(kind: str) -> str:
    """``mosquitto`` or ``amqtt`` for the configured ``broker.kind``."""
    if kind == "external":
        raise BrokerStartError("broker.kind is external: there is no broker to run here; "
                               "processes connect to broker.url")
    if kind == "mosquitto":
        if not mosquitto.is_installed():
            raise BrokerStartError("broker.kind is mosquitto but mosquitto (with "
                                   "mosquitto_passwd) is not installed")
        return kind
    if kind == "amqtt":
        return kind
    if kind == "auto":
        if mosquitto.is_installed():
            return "mosquitto"
        print(f"clusterdeck: {mosquitto.check_mosquitto(installed=False)}", file=sys.stderr)
        return "amqtt"
    raise BrokerStartError(f"unknown broker.kind {kind!r}")


def pick_free_port(host: str) -> int:
    """A port nothing listens on at ``host`` right now (the OS's choice)."""
    family = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _port_is_free(host: str, port: int) -> bool:
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(config: Mapping[str, Any], cluster_dir: Path) -> int:
    """``broker.port``; when 0, the port of this cluster's last broker if it is free.

    Reusing the last port lets a restarted broker come back where every client
    already reconnects to; a new random port is picked only the first time.
    """
    host, port = config["broker.host"], int(config["broker.port"])
    if port:
        return port
    previous = read_connection(cluster_dir)
    if previous is not None:
        _, address = previous
        if address.host == host and _port_is_free(host, address.port):
            return address.port
    return pick_free_port(host)


def serve(config: Mapping[str, Any], cluster_dir: Path) -> int:
    """``run_broker`` for a command line: every known failure is one line and exit code 2."""
    from clusterdeck.broker.credentials import CredentialsError
    from clusterdeck.broker.mosquitto import MosquittoError
    try:
        return run_broker(config, cluster_dir)
    except (BrokerStartError, CredentialsError, MosquittoError, ValueError, OSError) as error:
        print(f"clusterdeck broker: {error}", file=sys.stderr)
        return 2


def run_broker(config: Mapping[str, Any], cluster_dir: Path) -> int:
    """Start the cluster's broker as configured; returns only for amqtt (exit status)."""
    kind = resolve_kind(config["broker.kind"])
    cluster_id = config["cluster.id"]
    cluster_dir = ensure_private_dir(Path(cluster_dir))
    broker_dir = ensure_private_dir(cluster_dir / BROKER_DIR_NAME)
    credentials = load_or_create(cluster_dir, cluster_id)
    address = BrokerAddress(config["broker.host"], choose_port(config, cluster_dir))
    if kind == "mosquitto":
        _become_mosquitto(config, cluster_dir, broker_dir, address, credentials)
    return _run_amqtt(cluster_dir, broker_dir, address, credentials)


def _become_mosquitto(config: Mapping[str, Any], cluster_dir: Path, broker_dir: Path,
                      address: BrokerAddress, credentials: Credentials) -> NoReturn:
    conf_file = mosquitto.write_files(broker_dir, host=address.host, port=address.port,
                                      credentials=credentials,
                                      limits=BrokerLimits.from_config(config))
    write_connection(cluster_dir, "mosquitto", address)
    print(f"clusterdeck: starting Mosquitto for cluster {credentials.cluster_id!r} on "
          f"{address.url()}", file=sys.stderr, flush=True)
    mosquitto.exec_mosquitto(conf_file)


def _run_amqtt(cluster_dir: Path, broker_dir: Path, address: BrokerAddress,
               credentials: Credentials) -> int:
    from clusterdeck.broker import (
        embedded,  # imported here: amqtt is slow to import and rarely used
    )

    password_file = broker_dir / embedded.PASSWORD_NAME
    embedded.write_password_file(password_file, credentials)
    broker_config = embedded.broker_config(host=address.host, port=address.port,
                                           password_file=password_file,
                                           credentials=credentials)
    write_connection(cluster_dir, "amqtt", address)
    print(f"clusterdeck: starting amqtt for cluster {credentials.cluster_id!r} on "
          f"{address.url()}", file=sys.stderr, flush=True)
    return embedded.run(broker_config)

def wait_ready(address: BrokerAddress, timeout: float) -> None:
    """Return once an authenticated client gets a CONNACK from ``address``.

    Retries while nothing listens yet; a refused login is raised at once
    (BrokerAuthError), since waiting longer cannot fix it. BrokerConnectError after
    ``timeout``.
    """
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        remaining = deadline - time.monotonic()
        client = make_client(address, f"clusterdeck-probe-{time.monotonic_ns()}")
        try:
            connect_and_wait(client, address, max(remaining, 0.05))
        except BrokerAuthError:
            raise
        except BrokerConnectError as error:
            if time.monotonic() + delay >= deadline:
                raise BrokerConnectError(f"no broker ready at {address.url()} within "
                                         f"{timeout:g} s: {error}") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
            continue
        client.disconnect()
        client.loop_stop()
        return
