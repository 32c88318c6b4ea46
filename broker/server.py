"""The body of ``clusterdeck broker``: prepare the cluster's broker, then become it.

For Mosquitto this process execs into the broker, so the pid the supervisor watches
(and kills, for fault injection) is Mosquitto itself. amqtt has no binary of its own
and runs inside this process until SIGTERM or SIGINT.

Where it listens is ``broker.bind`` (``broker.host`` is its older name, still read
when ``broker.bind`` is left at its default). Beyond loopback it speaks TLS with the
cluster's own CA (``broker.tls = auto``); the processes of this machine then connect
over TLS too, to the loopback address when the bind address is a wildcard.
"""

from __future__ import annotations

import random
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
from clusterdeck.broker.tls import (
    TlsFiles,
    ca_file,
    ensure_certificates,
    is_loopback,
    is_wildcard,
    server_names,
)

BROKER_DIR_NAME = "broker"
DEFAULT_BIND = "127.0.0.1"


class BrokerStartError(RuntimeError):
    """The configured broker cannot be run by this process."""


def resolve_kind(kind: str) -> str:
    """``mosquitto`` or ``amqtt`` for the configured ``broker.kind``."""
    if kind == "external":
        raise BrokerStartError("broker.kind is external: there is no broker to run here; "
                               "processes connect to broker.url")
    if kind == "mosquitto":
        if not mosquitto.is_installed():
            raise BrokerStartError("broker.kind is mosquitto but mosquitto is not installed")
        return kind
    if kind == "amqtt":
        return kind
    if kind == "auto":
        if mosquitto.is_installed():
            return "mosquitto"
        print(f"clusterdeck: {mosquitto.check_mosquitto(installed=False)}", file=sys.stderr)
        return "amqtt"
    raise BrokerStartError(f"unknown broker.kind {kind!r}")


def listen_host(config: Mapping[str, Any]) -> str:
    """The address the broker binds: ``broker.bind``, or the older ``broker.host`` when
    only that one was changed (configurations written before broker.bind existed)."""
    bind, host = str(config["broker.bind"]), str(config["broker.host"])
    return host if bind == DEFAULT_BIND and host != DEFAULT_BIND else bind


def connect_host(bind: str) -> str:
    """The address processes of this machine connect to, for a broker bound to ``bind``:
    a wildcard is not an address to connect to, so loopback of the same family."""
    if is_wildcard(bind):
        return "::1" if bind == "::" else "127.0.0.1"
    return bind


def tls_enabled(config: Mapping[str, Any]) -> bool:
    """``broker.tls``: on, off, or (auto) on exactly when the broker listens beyond
    loopback, where logins and job data would otherwise cross the network in clear."""
    setting = config["broker.tls"]
    if setting == "auto":
        return not is_loopback(listen_host(config))
    return setting == "on"


def prepare_tls(config: Mapping[str, Any], cluster_dir: Path) -> TlsFiles | None:
    """The cluster's CA and a current server certificate when TLS is on, else None.

    Called by ``clusterdeck up`` before it starts the broker (its first client must
    trust the CA before the broker writes broker.json) and by the broker itself.
    """
    if config["broker.kind"] == "external" or not tls_enabled(config):
        return None
    return ensure_certificates(cluster_dir, server_names(listen_host(config)))


def local_address(config: Mapping[str, Any], cluster_dir: Path, port: int) -> BrokerAddress:
    """Where the processes of this machine reach the cluster's broker, without a login;
    over TLS trusting the cluster's CA when TLS is on (``prepare_tls`` made it)."""
    address = BrokerAddress(connect_host(listen_host(config)), port)
    if not tls_enabled(config):
        return address
    return address.with_tls(ca_file(cluster_dir).read_text(encoding="ascii"))


PORTS_FROM = 20000  # the lowest port picked for a broker


def pick_free_port(host: str) -> int:
    """A port nothing listens on at ``host`` right now, below the OS's ephemeral range.

    The port is bound by the broker a moment later, in another process. A port from the
    ephemeral range (what binding port 0 gives) may meanwhile be handed by the kernel to
    any outgoing connection of the machine, a Py4J or an MQTT client's, and the broker
    then never starts; below the range only another explicit bind can take it."""
    below = _ephemeral_start()
    for _ in range(100):
        port = random.randrange(PORTS_FROM, below) if below > PORTS_FROM + 100 else 0
        if port and _port_is_free(host, port):
            return port
    family = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:  # the OS's choice, then
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _ephemeral_start() -> int:
    """The first port of Linux's ephemeral range (32768 where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


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
    bind, port = listen_host(config), int(config["broker.port"])
    if port:
        return port
    previous = read_connection(cluster_dir)
    if previous is not None:
        _, address = previous
        if address.host == connect_host(bind) and _port_is_free(bind, address.port):
            return address.port
    return pick_free_port(bind)


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
    tls = prepare_tls(config, cluster_dir)
    bind = listen_host(config)
    address = local_address(config, cluster_dir, choose_port(config, cluster_dir))
    if kind == "mosquitto":
        _become_mosquitto(config, cluster_dir, broker_dir, bind, address, credentials, tls)
    return _run_amqtt(cluster_dir, broker_dir, bind, address, credentials, tls)


def _announce(kind: str, cluster_id: str, bind: str, address: BrokerAddress) -> None:
    secured = "TLS" if address.tls else "plain TCP"
    print(f"clusterdeck: starting {kind} for cluster {cluster_id!r} on {bind}:"
          f"{address.port} ({secured}; local clients use {address.url()})",
          file=sys.stderr, flush=True)


def _become_mosquitto(config: Mapping[str, Any], cluster_dir: Path, broker_dir: Path,
                      bind: str, address: BrokerAddress, credentials: Credentials,
                      tls: TlsFiles | None) -> NoReturn:
    conf_file = mosquitto.write_files(broker_dir, host=bind, port=address.port,
                                      credentials=credentials,
                                      limits=BrokerLimits.from_config(config), tls=tls)
    write_connection(cluster_dir, "mosquitto", address, tls.ca_file if tls else None)
    _announce("Mosquitto", credentials.cluster_id, bind, address)
    mosquitto.exec_mosquitto(conf_file)


def _run_amqtt(cluster_dir: Path, broker_dir: Path, bind: str, address: BrokerAddress,
               credentials: Credentials, tls: TlsFiles | None) -> int:
    from clusterdeck.broker import (
        embedded,  # imported here: amqtt is slow to import and rarely used
    )

    password_file = broker_dir / embedded.PASSWORD_NAME
    embedded.write_password_file(password_file, credentials)
    broker_config = embedded.broker_config(host=bind, port=address.port,
                                           password_file=password_file,
                                           credentials=credentials, tls=tls)
    write_connection(cluster_dir, "amqtt", address, tls.ca_file if tls else None)
    _announce("amqtt", credentials.cluster_id, bind, address)
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
