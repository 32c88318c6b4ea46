"""TLS for channels beyond loopback, with the TaskManager's self-signed certificate.

The server uses the same certificate as the TaskManager's data service (one key pair,
one fingerprint in its registration, core/dataservice/selfsigned.py); a consumer accepts
exactly the certificate whose fingerprint it was given, whatever name it carries.
"""

from __future__ import annotations

import asyncio
import ssl

from clusterdeck.core.dataservice.selfsigned import SelfSigned, fingerprint_of


def server_context(certificate: SelfSigned) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certificate.cert_file, certificate.key_file)
    return context


def client_context() -> ssl.SSLContext:
    """Verifies nothing by itself: ``pinned`` checks the certificate after the handshake."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def pinned(transport: asyncio.BaseTransport, fingerprint: str) -> bool:
    """Whether the peer of ``transport`` showed the certificate of ``fingerprint``."""
    ssl_object = transport.get_extra_info("ssl_object")
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    return bool(der) and fingerprint_of(der) == fingerprint
