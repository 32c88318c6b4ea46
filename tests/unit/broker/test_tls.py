import contextlib
import datetime
import ipaddress
import socket
import ssl
import stat
import threading
import types

import psutil
import pytest
from cryptography import x509

from clusterdeck.broker import tls
from clusterdeck.broker.server import connect_host, listen_host, local_address, tls_enabled
from clusterdeck.core.config.settings import Config

NOW = datetime.datetime(2026, 11, 23, 12, 0, tzinfo=datetime.UTC)
NAMES = ["localhost", "127.0.0.1", "::1", "node-a", "192.0.2.7"]


def load(path):
    return x509.load_pem_x509_certificate(path.read_bytes())


def san(cert):
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return (set(names.get_values_for_type(x509.DNSName)),
            set(names.get_values_for_type(x509.IPAddress)))


@pytest.fixture
def cluster_dir(tmp_path):
    return tmp_path / "clusters" / "lab"


def test_the_server_certificate_names_every_address_it_is_reached_by(cluster_dir):
    files = tls.ensure_certificates(cluster_dir, NAMES, now=NOW)
    dns, ips = san(load(files.cert_file))
    assert dns == {"localhost", "node-a"}
    assert ips == {ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "192.0.2.7")}
    assert set(tls.certificate_names(files.cert_file)) == set(NAMES)


def test_the_server_certificate_is_signed_by_the_cluster_ca_and_valid_now(cluster_dir):
    files = tls.ensure_certificates(cluster_dir, NAMES, now=NOW)
    ca, cert = load(files.ca_file), load(files.cert_file)
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.not_valid_before_utc <= NOW < cert.not_valid_after_utc
    assert cert.not_valid_after_utc - NOW <= tls.SERVER_VALIDITY
    assert ca.not_valid_after_utc - NOW >= datetime.timedelta(days=3000)
    assert "lab" in ca.subject.rfc4514_string()


def test_keys_and_their_folder_are_private(cluster_dir):
    files = tls.ensure_certificates(cluster_dir, NAMES, now=NOW)
    assert stat.S_IMODE(files.ca_file.parent.stat().st_mode) == 0o700
    for path in files.ca_file.parent.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    assert (files.ca_file.parent / tls.CA_KEY_NAME).exists()


def handshake(files, server_hostname, cafile):
    """A TLS handshake over a socket pair (no network): the client's error, or None."""
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(files.cert_file, files.key_file)
    client_context = ssl.create_default_context(cafile=cafile)
    left, right = socket.socketpair()
    errors = []

    def serve():
        with contextlib.suppress(ssl.SSLError, OSError):
            server_context.wrap_socket(right, server_side=True).close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        client_context.wrap_socket(left, server_hostname=server_hostname).close()
    except ssl.SSLError as error:
        errors.append(error)
        left.close()
    thread.join(10)
    right.close()
    return errors[0] if errors else None


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "node-a", "192.0.2.7"])
def test_a_client_trusting_the_ca_accepts_every_listed_name(cluster_dir, name):
    files = tls.ensure_certificates(cluster_dir, NAMES, now=datetime.datetime.now(
        datetime.UTC))
    assert handshake(files, name, files.ca_file) is None


def test_a_client_refuses_a_name_the_certificate_does_not_list(cluster_dir):
    files = tls.ensure_certificates(cluster_dir, NAMES)
    error = handshake(files, "node-b", files.ca_file)
    assert isinstance(error, ssl.SSLCertVerificationError)
    assert "node-b" in str(error) or "match" in str(error)


def test_a_client_without_the_ca_refuses_the_certificate(cluster_dir, tmp_path):
    files = tls.ensure_certificates(cluster_dir, NAMES)
    other = tls.ensure_certificates(tmp_path / "other", NAMES)
    assert isinstance(handshake(files, "127.0.0.1", other.ca_file),
                      ssl.SSLCertVerificationError)


def test_a_second_call_keeps_a_current_certificate(cluster_dir):
    first = tls.ensure_certificates(cluster_dir, NAMES, now=NOW)
    before = (first.ca_file.read_bytes(), first.cert_file.read_bytes())
    again = tls.ensure_certificates(cluster_dir, NAMES[:3], now=NOW)
    assert (again.ca_file.read_bytes(), again.cert_file.read_bytes()) == before


def test_a_new_name_makes_a_new_server_certificate_from_the_same_ca(cluster_dir):
    first = tls.ensure_certificates(cluster_dir, NAMES, now=NOW)
    ca_before, cert_before = first.ca_file.read_bytes(), first.cert_file.read_bytes()
    files = tls.ensure_certificates(cluster_dir, [*NAMES, "10.1.2.3"], now=NOW)
    assert files.ca_file.read_bytes() == ca_before
    assert files.cert_file.read_bytes() != cert_before
    assert tls.covers(tls.certificate_names(files.cert_file), "10.1.2.3")
    load(files.cert_file).verify_directly_issued_by(load(files.ca_file))


def test_a_certificate_near_its_end_is_renewed(cluster_dir):
    first = tls.ensure_certificates(cluster_dir, NAMES, now=NOW)
    cert_before = first.cert_file.read_bytes()
    later = NOW + tls.SERVER_VALIDITY - tls.RENEW_BEFORE + datetime.timedelta(days=1)
    files = tls.ensure_certificates(cluster_dir, NAMES, now=later)
    assert files.cert_file.read_bytes() != cert_before
    assert load(files.cert_file).not_valid_after_utc > later + tls.RENEW_BEFORE


def test_covers_compares_addresses_by_value_and_names_without_case():
    assert tls.covers(["::1", "node-a"], "0:0:0:0:0:0:0:1")
    assert tls.covers(["node-a"], "NODE-A")
    assert not tls.covers(["node-a"], "node-b")


def test_server_names_cover_loopback_the_host_and_a_specific_bind():
    names = tls.server_names("192.0.2.7")
    assert {"localhost", "127.0.0.1", "::1", "192.0.2.7"} <= set(names)


def test_a_wildcard_bind_names_every_interface_address_a_lan_client_may_use(monkeypatch):
    # On a LAN without DNS names a client knows the machine by an interface address only.
    def snic(family, address):
        return types.SimpleNamespace(family=family, address=address)
    monkeypatch.setattr(tls.psutil, "net_if_addrs", lambda: {
        "lo": [snic(socket.AF_INET, "127.0.0.1")],
        "eth0": [snic(socket.AF_INET, "192.0.2.40"), snic(socket.AF_INET6, "2001:db8::40"),
                 snic(socket.AF_INET6, "fe80::1%eth0"), snic(psutil.AF_LINK, "02:42:ac:11:00:02")],
    })
    names = tls.server_names("0.0.0.0")
    assert {"192.0.2.40", "2001:db8::40"} <= set(names)
    assert not [name for name in names if name.startswith("fe80") or ":42:" in name]
    assert "192.0.2.40" not in tls.server_names("192.0.2.7")


@pytest.mark.parametrize(("bind", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.0.2.7", False), ("node-a", False),
])
def test_is_loopback(bind, loopback):
    assert tls.is_loopback(bind) is loopback


@pytest.mark.parametrize(("settings", "enabled"), [
    ({}, False),
    ({"broker.tls": "on"}, True),
    ({"broker.bind": "0.0.0.0"}, True),
    ({"broker.bind": "0.0.0.0", "broker.tls": "off"}, False),
    ({"broker.host": "192.0.2.7"}, True),
])
def test_tls_auto_follows_the_bind_address(settings, enabled):
    assert tls_enabled(Config(settings)) is enabled


def test_broker_host_is_still_read_when_broker_bind_is_left_alone():
    assert listen_host(Config({"broker.host": "192.0.2.7"})) == "192.0.2.7"
    assert listen_host(Config({"broker.host": "192.0.2.7",
                               "broker.bind": "0.0.0.0"})) == "0.0.0.0"


def test_local_processes_connect_to_loopback_of_a_wildcard_bind():
    assert connect_host("0.0.0.0") == "127.0.0.1"
    assert connect_host("::") == "::1"
    assert connect_host("192.0.2.7") == "192.0.2.7"


def test_local_address_trusts_the_cluster_ca_when_tls_is_on(cluster_dir):
    files = tls.ensure_certificates(cluster_dir, NAMES, now=NOW)
    address = local_address(Config({"broker.tls": "on"}), cluster_dir, 8883)
    assert address.url() == "mqtts://127.0.0.1:8883"
    assert address.ca_pem == files.ca_file.read_text()
    assert not local_address(Config(), cluster_dir, 1883).tls
