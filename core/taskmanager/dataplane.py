"""Starting a TaskManager's data service, under the broker's rule for encryption.

The service listens where its peers can reach it: on loopback when the broker is on
loopback only (every TaskManager is on this machine then), on every interface otherwise,
announcing the address this machine reaches the broker from (a peer that reaches the
broker most likely reaches us the same way). A TaskManager of the broker's own machine
reaches a broker bound to every interface on loopback, which no other machine can use:
it announces the address the broker's machine is reached at instead, the one of its
route to the rest of the network. Beyond loopback it speaks TLS, as the broker does
(docs/security.md); its certificate is self-signed and pinned through the registration
(core/dataservice/selfsigned.py).

Beside it, on the same address and with the same key and certificate, the channel server
of streaming tasks' pipelined exchanges (core/streaming/network, another port).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.server import listen_host
from clusterdeck.broker.tls import is_loopback, is_wildcard
from clusterdeck.core.config.settings import Config
from clusterdeck.core.dataservice import capability, selfsigned
from clusterdeck.core.dataservice.server import DataServer, DataServiceAddress
from clusterdeck.core.engine.mqttparts import ClusterBroker
from clusterdeck.core.streaming.network import ChannelServer, ChannelServerAddress


@dataclass(frozen=True)
class DataPlane:
    """A started data service and what the registration announces of it."""

    server: DataServer
    address: DataServiceAddress
    key: str
    channels: ChannelServer | None = None
    channel_address: ChannelServerAddress | None = None
    broker: ClusterBroker | None = None
    """The cluster's broker with this TaskManager's login: streaming jobs' MQTT sources and
    sinks connect to it (core/engine/mqttparts.py), their code never sees the login."""

    @property
    def stream_address(self) -> str:
        """``host:port`` of the channel server, as the registration announces it."""
        address = self.channel_address
        if address is None:
            return ""
        host = f"[{address.host}]" if ":" in address.host else address.host
        return f"{host}:{address.port}"

    def stop(self) -> None:
        self.server.stop()
        if self.channels is not None:
            self.channels.close()


def start_data_plane(config: Config, broker: BrokerAddress, scratch: Path,
                     locate: Callable[[str], str] = str, owner: str = "") -> DataPlane:
    """``locate``: where this machine keeps a job's work dir (core/taskmanager/jobfolders.py);
    ``owner``: this TaskManager's id."""
    bind, advertised = data_service_address(config, broker.host, broker.port)
    encrypted = config["taskmanager.data.tls"] == "always" or not is_loopback(bind)
    key = capability.new_key()
    certificate = selfsigned.make(scratch / "tls", advertised) if encrypted else None
    server = DataServer(key, max_connections=config["taskmanager.data.max-connections"],
                        locate=locate)
    address = server.start(bind, advertised, None, port=config["taskmanager.data.port"],
                           certificate=certificate)
    channels = ChannelServer(key, certificate=certificate, owner=owner,
                             connect_timeout=config["taskmanager.data.connect-timeout"])
    try:
        channel_address = channels.start(bind, advertised)
    except BaseException:
        channels.close()
        server.stop()
        raise
    return DataPlane(server, address, key, channels, channel_address,
                     ClusterBroker(broker, config["cluster.id"]))


# Where "the rest of the network" is, for a route lookup (a UDP connect sends nothing):
# an address of TEST-NET-2 (RFC 5737), which no machine has, so the default route's.
ELSEWHERE = "198.51.100.1"


def data_service_address(config: Config, broker_host: str, broker_port: int
                         ) -> tuple[str, str]:
    """Where the data service listens and the host it announces, for a TaskManager that
    reaches the broker at ``broker_host``: loopback only when the broker listens on
    loopback only (``broker.bind`` of the cluster's configuration, which a TaskManager
    of another machine does not have: its broker's host tells), else an address other
    machines reach, never a loopback one unless ``taskmanager.data.host`` says so."""
    bind = config["taskmanager.data.bind"]
    if bind == "auto":
        local_only = is_loopback(broker_host) and is_loopback(listen_host(config))
        bind = "127.0.0.1" if local_only else "0.0.0.0"
    if config["taskmanager.data.host"]:
        return bind, config["taskmanager.data.host"]
    if not is_wildcard(bind):
        return bind, bind
    towards = _address_towards(broker_host, broker_port)
    if is_loopback(towards):
        towards = _address_towards(ELSEWHERE, broker_port)
    return bind, towards


def _address_towards(host: str, port: int) -> str:
    """This machine's address on the route to ``host`` (a UDP connect sends nothing)."""
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(info[0], socket.SOCK_DGRAM) as probe:
            probe.connect(info[4])
            return str(probe.getsockname()[0])
    except OSError:
        return socket.gethostname()
