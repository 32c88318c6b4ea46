"""TLS as each broker's config and the connection file carry it."""

import json
import ssl

from amqtt.contexts import BrokerConfig

from clusterdeck.broker import embedded, mosquitto, tls
from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.client import make_client, tls_context
from clusterdeck.broker.connection import connection_file, read_connection, write_connection
from clusterdeck.broker.credentials import load_or_create
from clusterdeck.broker.limits import BrokerLimits

LIMITS = BrokerLimits(max_queued_messages=100, max_inflight_messages=10,
                      message_size_limit=2000, max_packet_size=3000)


def files(tmp_path):
    return tls.ensure_certificates(tmp_path / "lab", ["localhost", "127.0.0.1"])


def mosquitto_lines(tmp_path, tls_files):
    text = mosquitto.config_text(host="0.0.0.0", port=8883, password_file=tmp_path / "p",
                                 acl_file=tmp_path / "a", limits=LIMITS, as_root=False,
                                 tls=tls_files)
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_mosquitto_listener_gets_the_certificate_and_tls_12_or_newer(tmp_path):
    tls_files = files(tmp_path)
    lines = mosquitto_lines(tmp_path, tls_files)
    at = lines.index("listener 8883 0.0.0.0")
    assert lines[at + 1:at + 5] == [f"cafile {tls_files.ca_file}",
                                    f"certfile {tls_files.cert_file}",
                                    f"keyfile {tls_files.key_file}",
                                    "tls_version tlsv1.2"]


def test_mosquitto_without_tls_has_no_certificate_lines(tmp_path):
    lines = mosquitto_lines(tmp_path, None)
    assert not [line for line in lines if line.split()[0] in ("cafile", "certfile",
                                                              "keyfile", "tls_version")]


def test_amqtt_listener_is_an_ssl_listener_its_own_config_accepts(tmp_path):
    tls_files = files(tmp_path)
    credentials = load_or_create(tmp_path / "lab", "lab")
    config = embedded.broker_config(host="127.0.0.1", port=8883, password_file=tmp_path / "pw",
                                    credentials=credentials, tls=tls_files)
    assert config["listeners"]["default"] == {
        "type": "tcp", "bind": "127.0.0.1:8883", "ssl": True,
        "certfile": str(tls_files.cert_file), "keyfile": str(tls_files.key_file)}
    listener = BrokerConfig.from_dict({"listeners": config["listeners"]}).listeners["default"]
    assert listener.ssl and listener.certfile == tls_files.cert_file


def test_the_connection_file_names_the_ca_and_readers_get_an_mqtts_address(tmp_path):
    tls_files = files(tmp_path)
    pem = tls_files.ca_file.read_text()
    write_connection(tmp_path, "amqtt", BrokerAddress("127.0.0.1", 8883, "u", "pw",
                                                      tls=True, ca_pem=pem), tls_files.ca_file)
    data = json.loads(connection_file(tmp_path).read_text())
    assert data["tls"] is True and data["ca_file"] == str(tls_files.ca_file)
    assert "BEGIN" not in connection_file(tmp_path).read_text()
    assert read_connection(tmp_path) == ("amqtt", BrokerAddress("127.0.0.1", 8883, tls=True,
                                                                ca_pem=pem))


def test_an_older_connection_file_without_tls_means_plain_tcp(tmp_path):
    connection_file(tmp_path).write_text(json.dumps(
        {"version": 1, "kind": "mosquitto", "host": "127.0.0.1", "port": 1883}))
    assert read_connection(tmp_path) == ("mosquitto", BrokerAddress("127.0.0.1", 1883))


def test_a_tls_client_checks_the_name_and_trusts_only_the_given_ca(tmp_path):
    tls_files = files(tmp_path)
    address = BrokerAddress("127.0.0.1", 8883).with_tls(tls_files.ca_file.read_text())
    context = tls_context(address)
    assert context.check_hostname and context.verify_mode is ssl.CERT_REQUIRED
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert [c["subject"] for c in context.get_ca_certs()] == [
        c["subject"] for c in ssl.create_default_context(
            cafile=tls_files.ca_file).get_ca_certs()]
    client = make_client(address, "tls-unit")
    assert client._ssl_context is not None and not client._tls_insecure


def test_a_plain_address_makes_a_plain_client():
    assert make_client(BrokerAddress("127.0.0.1", 1883), "plain-unit")._ssl_context is None
