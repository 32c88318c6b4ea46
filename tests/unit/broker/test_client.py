import socket

import paho.mqtt.client as mqtt
import pytest

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.client import BrokerConnectError, connect_and_wait, make_client
from clusterdeck.broker.server import pick_free_port


@pytest.fixture
def tcp_socket():
    with socket.create_server(("127.0.0.1", 0)) as server:
        sock = socket.create_connection(server.getsockname())
        yield sock
        sock.close()


def nodelay(sock):
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_client_speaks_mqtt_3_1_1_with_the_login_set():
    client = make_client(BrokerAddress("127.0.0.1", 1883, "u", "p"), "c1")
    assert client.protocol == mqtt.MQTTv311
    assert client.username == "u"
    assert client.password == "p"


def test_client_never_queues_away_or_throttles_below_the_runtime():
    client = make_client(BrokerAddress("127.0.0.1", 1883), "c1")
    assert client._max_inflight_messages == 100
    assert client._max_queued_messages == 0


def test_every_new_socket_gets_tcp_nodelay(tcp_socket):
    client = make_client(BrokerAddress("127.0.0.1", 1883), "c1")
    client.on_socket_open(client, None, tcp_socket)
    assert nodelay(tcp_socket)


def test_a_replaced_on_socket_open_is_chained_not_lost(tcp_socket):
    client = make_client(BrokerAddress("127.0.0.1", 1883), "c1")
    seen = []
    client.on_socket_open = lambda c, userdata, sock: seen.append(sock)
    client.on_socket_open(client, None, tcp_socket)
    assert nodelay(tcp_socket)
    assert seen == [tcp_socket]


def test_the_will_is_set():
    client = make_client(BrokerAddress("127.0.0.1", 1883), "c1",
                         will=("clusterdeck/a/presence/x", b"offline", 1, True))
    assert client._will_topic == b"clusterdeck/a/presence/x"
    assert client._will_payload == b"offline"


def test_connecting_where_nothing_listens_is_a_clear_error():
    address = BrokerAddress("127.0.0.1", pick_free_port("127.0.0.1"))
    client = make_client(address, "c1")
    with pytest.raises(BrokerConnectError, match="cannot reach the broker"):
        connect_and_wait(client, address, 1.0)
