"""The one place paho clients are built, so every process talks to the broker alike.

MQTT 3.1.1 only, because amqtt speaks nothing else. Nagle is turned off on every
socket: with it, a request/reply round trip costs 44-88 ms instead of a fraction of a
millisecond (see MQTT-FACTS). paho's own queue and inflight window are opened up: the
runtime bounds what it sends itself and must never lose a message inside paho.

An ``mqtts://`` address gets TLS 1.2 or newer with the broker's name checked against
its certificate, trusting the address's own CA (a cluster's broker is signed by a CA
made for that cluster) or else the system's CAs.
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

from clusterdeck.broker.address import BrokerAddress

MAX_INFLIGHT = 100
RECONNECT_MIN_DELAY = 0.05
RECONNECT_MAX_DELAY = 2
DEFAULT_KEEPALIVE = 30

_AUTH_FAILURES = {"Not authorized", "Bad user name or password"}


class BrokerConnectError(ConnectionError):
    """No session with the broker: nothing listens there, or it did not answer in time."""


class BrokerAuthError(BrokerConnectError):
    """The broker refused the login: wrong cluster, wrong password or no login at all."""


def _set_nodelay(sock: Any) -> None:
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _NoDelayClient(mqtt.Client):
    """A paho client whose every new socket gets TCP_NODELAY, and whose sending threads
    may write what they publish themselves (``write_now``).

    ``on_socket_open`` stays assignable: whatever callback a caller sets is chained
    after the option is set, so replacing it cannot bring Nagle back. Reading the
    property returns the chained wrapper, not the caller's function.
    """

    def _get_socket_open(self) -> Any:
        return mqtt.Client.on_socket_open.fget(self)  # type: ignore[attr-defined]

    def _set_socket_open(self, func: Any) -> None:
        def open_with_nodelay(client: mqtt.Client, userdata: Any, sock: Any) -> None:
            _set_nodelay(sock)
            if func is not None:
                func(client, userdata, sock)

        mqtt.Client.on_socket_open.fset(self, open_with_nodelay)  # type: ignore[attr-defined]

    on_socket_open = property(_get_socket_open, _set_socket_open)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # paho's writer is not safe for two threads: one could interleave its packet
        # into the middle of another's partial write. Every write takes this lock.
        self._write_lock = threading.RLock()

    def loop_write(self) -> mqtt.MQTTErrorCode:
        with self._write_lock:
            return super().loop_write()

    def write_now(self) -> None:
        """Write what is queued from the calling thread, instead of waking the network
        thread and waiting for it to write: a reply leaves a quarter of a round trip
        sooner (docs/benchmarks.md, section 1).

        Only a fast path: when the lock is busy (the network thread is writing, and will
        write this too), the socket is full or gone, or the connection is TLS (OpenSSL
        must not read and write one connection from two threads), nothing happens here
        and paho's network thread, woken by the publish as always, writes it."""
        if self._ssl or not self._write_lock.acquire(blocking=False):
            return
        try:
            self._packet_write()  # an error leaves the packet queued for the network thread
        finally:
            self._write_lock.release()


def tls_context(address: BrokerAddress) -> ssl.SSLContext:
    """The client side of a TLS connection to ``address``: its CA, hostname checked."""
    # create_default_context turns on CERT_REQUIRED and check_hostname: a client that
    # skipped either would hand its login to whoever answers on the broker's port.
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=address.ca_pem)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def make_client(address: BrokerAddress, client_id: str, *,
                will: tuple[str, bytes, int, bool] | None = None,
                clean_session: bool = True) -> _NoDelayClient:
    """A configured, unconnected paho client for ``address``.

    ``will`` is (topic, payload, qos, retain), published by the broker when this
    process dies without disconnecting. Callbacks use paho's VERSION2 signatures.
    """
    client = _NoDelayClient(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=clean_session,
        protocol=mqtt.MQTTv311,
    )
    client.on_socket_open = None
    if address.tls:
        client.tls_set_context(tls_context(address))
    if address.username is not None:
        client.username_pw_set(address.username, address.password)
    if will is not None:
        topic, payload, qos, retain = will
        client.will_set(topic, payload, qos, retain)
    client.reconnect_delay_set(RECONNECT_MIN_DELAY, RECONNECT_MAX_DELAY)
    client.max_inflight_messages_set(MAX_INFLIGHT)
    client.max_queued_messages_set(0)
    return client


def connect_and_wait(client: mqtt.Client, address: BrokerAddress, timeout: float,
                     keepalive: int = DEFAULT_KEEPALIVE) -> None:
    """Connect, start paho's network thread and return once the broker accepted us.

    Raises BrokerAuthError when the login is refused and BrokerConnectError when
    nothing listens at ``address`` or no CONNACK came within ``timeout``; in both
    cases the network thread is stopped again, so paho does not keep retrying.
    A callback already set as ``on_connect`` is still called.
    """
    answered = threading.Event()
    outcome: list[ReasonCode] = []
    previous = client.on_connect

    def on_connect(c: mqtt.Client, userdata: Any, flags: Any, reason: ReasonCode,
                   properties: Any) -> None:
        if not answered.is_set():
            outcome.append(reason)
            answered.set()
        if previous is not None:
            previous(c, userdata, flags, reason, properties)

    client.on_connect = on_connect
    client.connect_timeout = timeout
    try:
        try:
            client.connect(address.host, address.port, keepalive)
        except (OSError, ValueError) as error:
            raise BrokerConnectError(f"cannot reach the broker at {address.url()}: "
                                     f"{error}") from None
        client.loop_start()
        if not answered.wait(timeout):
            _stop(client)
            raise BrokerConnectError(f"the broker at {address.url()} did not accept the "
                                     f"connection within {timeout:g} s")
        reason = outcome[0]
        if reason.is_failure:
            _stop(client)
            if str(reason) in _AUTH_FAILURES:
                who = (f"the login of user {address.username!r}" if address.username
                       else "a connection without a login")
                raise BrokerAuthError(f"the broker at {address.url()} refused {who}: {reason}")
            raise BrokerConnectError(f"the broker at {address.url()} refused the "
                                     f"connection: {reason}")
    finally:
        client.on_connect = previous


def _stop(client: mqtt.Client) -> None:
    client.disconnect()
    client.loop_stop()

