import pytest

from clusterdeck.broker.address import BrokerAddress


def test_parse_reads_host_and_port():
    assert BrokerAddress.parse("mqtt://127.0.0.1:1883") == BrokerAddress("127.0.0.1", 1883)


def test_parse_reads_user_and_password():
    address = BrokerAddress.parse("mqtt://alice:s3cret@broker.local:8883")
    assert (address.host, address.port) == ("broker.local", 8883)
    assert (address.username, address.password) == ("alice", "s3cret")


def test_parse_unquotes_percent_encoded_credentials():
    address = BrokerAddress.parse("mqtt://a%40b:p%3Aw%2Fd@h:1")
    assert (address.username, address.password) == ("a@b", "p:w/d")


def test_parse_reads_bracketed_ipv6_hosts():
    assert BrokerAddress.parse("mqtt://[::1]:1883") == BrokerAddress("::1", 1883)


@pytest.mark.parametrize("url", [
    "",
    "127.0.0.1:1883",
    "tcp://127.0.0.1:1883",
    "mqtts://127.0.0.1",
    "mqtt://127.0.0.1",
    "mqtt://:1883",
    "mqtt://127.0.0.1:0",
    "mqtt://127.0.0.1:70000",
    "mqtt://127.0.0.1:port",
    "mqtt://127.0.0.1:1883/path",
    "mqtt://127.0.0.1:1883?x=1",
    "mqtt://:pw@127.0.0.1:1883",
])
def test_parse_refuses_anything_but_mqtt_or_mqtts_host_port(url):
    with pytest.raises(ValueError, match="broker"):
        BrokerAddress.parse(url)


def test_url_leaves_the_password_out_unless_asked():
    address = BrokerAddress("h", 1, "u", "p w")
    assert address.url() == "mqtt://u@h:1"
    assert address.url(with_password=True) == "mqtt://u:p%20w@h:1"


def test_url_round_trips_through_parse():
    address = BrokerAddress("::1", 1883, "a@b", "p:w")
    assert BrokerAddress.parse(address.url(with_password=True)) == address


def test_repr_never_shows_the_password():
    assert "hunter2" not in repr(BrokerAddress("h", 1, "u", "hunter2"))


def test_with_credentials_keeps_the_broker_and_changes_the_login():
    address = BrokerAddress("h", 1).with_credentials("u", "p")
    assert address == BrokerAddress("h", 1, "u", "p")
    assert address.without_credentials() == BrokerAddress("h", 1)


def test_a_password_without_a_user_is_refused():
    with pytest.raises(ValueError, match="username"):
        BrokerAddress("h", 1, None, "p")


def test_parse_reads_mqtts_as_tls_trusting_the_system_cas():
    address = BrokerAddress.parse("mqtts://u:p@broker.example:8883")
    assert address.tls and address.ca_pem is None
    assert (address.host, address.port, address.username) == ("broker.example", 8883, "u")


def test_tls_url_round_trips_and_keeps_the_scheme():
    address = BrokerAddress("h", 8883, "u", "p", tls=True)
    assert address.url() == "mqtts://u@h:8883"
    assert BrokerAddress.parse(address.url(with_password=True)) == address


def test_with_tls_carries_the_ca_which_repr_leaves_out():
    address = BrokerAddress("h", 1).with_tls("-----BEGIN CERTIFICATE-----")
    assert address.tls and address.ca_pem == "-----BEGIN CERTIFICATE-----"
    assert "BEGIN" not in repr(address)
    assert address.without_credentials().ca_pem == address.ca_pem


def test_a_ca_without_tls_is_refused():
    with pytest.raises(ValueError, match="TLS"):
        BrokerAddress("h", 1, ca_pem="pem")
