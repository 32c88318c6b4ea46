"""Broker management: where the cluster's broker is, who may use it, and running it.

The only package besides core's MQTT service that imports paho. The amqtt broker is
imported lazily (``clusterdeck.broker.embedded``) because it is slow to import and most
processes never run it.
"""

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.client import (
    BrokerAuthError,
    BrokerConnectError,
    connect_and_wait,
    make_client,
)
from clusterdeck.broker.connection import (
    NoBrokerError,
    client_address,
    read_connection,
    write_connection,
)
from clusterdeck.broker.credentials import ROLES, Credentials, CredentialsError, load_or_create
from clusterdeck.broker.server import BrokerStartError, pick_free_port, run_broker, wait_ready

__all__ = [
    "ROLES",
    "BrokerAddress",
    "BrokerAuthError",
    "BrokerConnectError",
    "BrokerStartError",
    "Credentials",
    "CredentialsError",
    "NoBrokerError",
    "client_address",
    "connect_and_wait",
    "load_or_create",
    "make_client",
    "pick_free_port",
    "read_connection",
    "run_broker",
    "wait_ready",
    "write_connection",
]
