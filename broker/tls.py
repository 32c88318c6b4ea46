"""A cluster's own CA and its broker's certificate, made with ``cryptography``.

A broker that listens beyond loopback carries logins, job code and results across the
network, so it speaks TLS. No public CA can sign a certificate for a desktop's name or
private address, and asking the user to run one is asking too much: every cluster gets
a CA of its own the first time TLS is on, and a server certificate signed by it. The
CA's certificate (not its key) is what a client must trust; local processes read it
from the cluster's folder, a TaskManager on another machine from the exported
credentials file. Everything lives in ``<cluster dir>/tls/`` (mode 0700, files 0600).

The server certificate is made again, by the same CA, when it is about to expire or
does not name every address the broker is now reached by (``broker.bind`` changed), so
clients that trust the CA keep working.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from clusterdeck.broker.credentials import ensure_private_dir

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

# ``cryptography`` is imported inside the functions that make or read certificates: it
# costs about 50 ms, and every clusterdeck process imports this module (through
# broker.server) while only a broker start and ``credentials export`` use it.

TLS_DIR_NAME = "tls"
CA_CERT_NAME = "ca.pem"
CA_KEY_NAME = "ca-key.pem"
SERVER_CERT_NAME = "server.pem"
SERVER_KEY_NAME = "server-key.pem"

CA_VALIDITY = datetime.timedelta(days=3650)
# Under the 398 days clients increasingly insist on for server certificates.
SERVER_VALIDITY = datetime.timedelta(days=397)
# A server certificate closer than this to its end is made again at the broker's start.
RENEW_BEFORE = datetime.timedelta(days=30)
# Signed a little in the past, so a client whose clock is slightly behind accepts it.
_CLOCK_SKEW = datetime.timedelta(minutes=5)

_WILDCARDS = ("", "0.0.0.0", "::")


@dataclass(frozen=True)
class TlsFiles:
    """Where the broker's TLS material is: what the broker and its clients are given."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def tls_dir(cluster_dir: Path) -> Path:
    return Path(cluster_dir) / TLS_DIR_NAME


def ca_file(cluster_dir: Path) -> Path:
    return tls_dir(cluster_dir) / CA_CERT_NAME


def is_wildcard(bind: str) -> bool:
    """True when ``bind`` means every interface of the machine."""
    return bind in _WILDCARDS


def is_loopback(bind: str) -> bool:
    """True when only this machine can reach a broker listening on ``bind``."""
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything, so assume the network


def server_names(bind: str) -> list[str]:
    """The names and addresses the broker's certificate must cover, for ``bind``.

    Local processes connect to 127.0.0.1 (or ::1, or ``localhost``); a TaskManager on
    another machine uses the host's name or the bind address. With a wildcard bind the
    machine's own addresses stand in for the bind address: those its name resolves to, and
    those of its interfaces, since on a LAN without DNS names a client knows the machine only
    by an interface address.
    """
    names = ["localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn()]
    if not is_wildcard(bind):
        names.append(bind)
    else:
        names += _addresses_of(socket.gethostname()) + interface_addresses()
    return _unique(names)


def interface_addresses() -> list[str]:
    """The IPv4 and IPv6 addresses of this machine's interfaces, link-local ones left out.

    A link-local address is only meaningful with its interface (``fe80::1%eth0``), which a
    certificate cannot name.
    """
    found: list[str] = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            try:
                ip = ipaddress.ip_address(address.address.split("%")[0])
            except ValueError:
                continue
            if not ip.is_link_local:
                found.append(str(ip))
    return found


def _addresses_of(host: str) -> list[str]:
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return [str(info[4][0]) for info in found]


def _unique(names: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for name in names:
        if name:
            seen.setdefault(name.lower(), None)
    return list(seen)


def ensure_certificates(cluster_dir: Path, names: Iterable[str],
                        now: datetime.datetime | None = None) -> TlsFiles:
    """The cluster's CA (made once) and a valid server certificate covering ``names``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    now = now or datetime.datetime.now(datetime.UTC)
    directory = ensure_private_dir(tls_dir(cluster_dir))
    files = TlsFiles(directory / CA_CERT_NAME, directory / SERVER_CERT_NAME,
                     directory / SERVER_KEY_NAME)
    ca_key_file = directory / CA_KEY_NAME
    wanted = _unique(names)
    new_ca = not (files.ca_file.exists() and ca_key_file.exists())
    if new_ca:
        ca_key, ca_cert = _make_ca(directory.parent.name, now)
        _write_private(ca_key_file, _key_pem(ca_key))
        _write_private(files.ca_file, ca_cert.public_bytes(serialization.Encoding.PEM))
    ca_cert = x509.load_pem_x509_certificate(files.ca_file.read_bytes())
    # A server certificate left from an older CA has the same issuer name but another
    # signature: with a new CA it is always made again.
    if new_ca or _server_needs_renewal(files, ca_cert, wanted, now):
        ca_key = serialization.load_pem_private_key(ca_key_file.read_bytes(), password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        key, cert = _make_server(ca_key, ca_cert, wanted, now)
        _write_private(files.key_file, _key_pem(key))
        _write_private(files.cert_file, cert.public_bytes(serialization.Encoding.PEM))
    return files


def certificate_names(cert_file: Path) -> list[str]:
    """The DNS names and IP addresses a certificate's SAN extension lists."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    return _san_names(cert)


def _san_names(cert: x509.Certificate) -> list[str]:
    from cryptography import x509

    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return ([name.lower() for name in san.get_values_for_type(x509.DNSName)]
            + [str(address) for address in san.get_values_for_type(x509.IPAddress)])


def covers(cert_names: Iterable[str], name: str) -> bool:
    """True when ``name`` (host name or address) is among ``cert_names``."""
    listed = {_normalised(n) for n in cert_names}
    return _normalised(name) in listed


def _normalised(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name.lower()


def _server_needs_renewal(files: TlsFiles, ca_cert: x509.Certificate, wanted: list[str],
                          now: datetime.datetime) -> bool:
    from cryptography import x509

    if not (files.cert_file.exists() and files.key_file.exists()):
        return True
    try:
        cert = x509.load_pem_x509_certificate(files.cert_file.read_bytes())
    except ValueError:
        return True
    if cert.issuer != ca_cert.subject or cert.not_valid_after_utc - RENEW_BEFORE < now:
        return True
    listed = set(_san_names(cert))
    return not all(covers(listed, name) for name in wanted)


def _make_ca(cluster_id: str, now: datetime.datetime
             ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "clusterdeck"),
                      x509.NameAttribute(NameOID.COMMON_NAME,
                                         f"clusterdeck CA of cluster {cluster_id}")])
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW)
            .not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _make_server(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate,
                 names: list[str], now: datetime.datetime
                 ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    alternative: list[x509.GeneralName] = []
    for name in names:
        try:
            alternative.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alternative.append(x509.DNSName(name))
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "clusterdeck"),
                         x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW)
            .not_valid_after(min(now + SERVER_VALIDITY, ca_cert.not_valid_after_utc))
            .add_extension(x509.SubjectAlternativeName(alternative), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return key, cert


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode 0600 from the first byte, replacing it whole."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
