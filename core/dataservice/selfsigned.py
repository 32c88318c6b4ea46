"""A self-signed certificate for one TaskManager's data service, pinned by fingerprint.

A TaskManager on another machine has no key of the cluster's CA (only its certificate,
docs/security.md), so it cannot get a certificate the usual way. It does not need one:
it makes its own when it starts and announces the certificate's SHA-256 fingerprint in
its registration, which travels over the authenticated broker. A client of its data
service accepts exactly that certificate, whatever name or address it carries.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

_VALIDITY = datetime.timedelta(days=397)
_CLOCK_SKEW = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class SelfSigned:
    cert_file: Path
    key_file: Path
    fingerprint: str  # sha256 of the certificate's DER bytes, hex


def fingerprint_of(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


def make(folder: Path, name: str) -> SelfSigned:
    """A fresh key and certificate in ``folder`` (files 0600, made for this process)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "clusterdeck"),
                         x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW)
            .not_valid_after(now + _VALIDITY)
            .sign(key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    cert_file = _write_private(folder, "data-cert.pem",
                               cert.public_bytes(serialization.Encoding.PEM))
    key_file = _write_private(folder, "data-key.pem", key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return SelfSigned(cert_file, key_file,
                      fingerprint_of(cert.public_bytes(serialization.Encoding.DER)))


def _write_private(folder: Path, name: str, data: bytes) -> Path:
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
    with os.fdopen(descriptor, "wb") as stream:  # mkstemp makes it 0600
        stream.write(data)
    os.replace(temporary, folder / name)
    return folder / name
