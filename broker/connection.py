"""The connection file: how local processes find a running cluster's broker.

``clusterdeck broker`` writes it when it starts (the port may have been picked at
random); JobManager, TaskManagers, clients and the GUI read it. It holds no secret,
only the kind and where the broker listens; the login comes from the credentials
file of the same cluster, chosen by role. When the broker speaks TLS it also names the
CA certificate to trust (a public file, in the cluster's ``tls/`` folder); readers get
an ``mqtts://`` address carrying that CA. Files of older versions have no ``tls`` key
and mean plain TCP.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.credentials import CredentialsError, load

FILE_NAME = "broker.json"
_FORMAT_VERSION = 1


class NoBrokerError(RuntimeError):
    """No broker is known for a cluster: it was never started in this data dir."""


def connection_file(cluster_dir: Path) -> Path:
    return Path(cluster_dir) / FILE_NAME


def write_connection(cluster_dir: Path, kind: str, address: BrokerAddress,
                     ca_file: Path | None = None) -> Path:
    """Record where the broker of this cluster listens; atomic, so readers never see half.

    ``ca_file`` is the CA a TLS client trusts; None with a TLS address means the
    system's CAs (an external broker with a public certificate).
    """
    path = connection_file(cluster_dir)
    data: dict[str, object] = {"version": _FORMAT_VERSION, "kind": kind,
                               "host": address.host, "port": address.port}
    if address.tls:
        data["tls"] = True
        data["ca_file"] = str(ca_file) if ca_file is not None else None
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


def read_connection(cluster_dir: Path) -> tuple[str, BrokerAddress] | None:
    """The (kind, address without login) last written, or None when there is none."""
    path = connection_file(cluster_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise NoBrokerError(f"the broker connection file is unreadable: {error}") from None
    try:
        if data["version"] != _FORMAT_VERSION:
            raise NoBrokerError(f"broker connection file version {data['version']!r} is "
                                f"not {_FORMAT_VERSION}")
        address = BrokerAddress(str(data["host"]), int(data["port"]))
        kind = str(data["kind"])
        tls, ca_name = bool(data.get("tls", False)), data.get("ca_file")
    except (KeyError, TypeError, ValueError, AttributeError):
        raise NoBrokerError("the broker connection file is malformed") from None
    if not tls:
        return kind, address
    if ca_name is None:
        return kind, address.with_tls(None)
    try:
        return kind, address.with_tls(Path(ca_name).read_text(encoding="ascii"))
    except (OSError, ValueError) as error:
        raise NoBrokerError(f"the broker's CA certificate is unreadable: {error}") from None


def client_address(cluster_dir: Path, cluster_id: str, role: str,
                   name: str | None = None) -> BrokerAddress:
    """The address of this cluster's broker with the login of ``role`` (a TaskManager's
    own: ``name``).

    Raises NoBrokerError, naming the cluster, when its broker was never started here.
    For an external broker the stored address carries no login: the credentials then
    come from ``broker.url``, not from here.
    """
    kind, address = known_connection(cluster_dir, cluster_id)
    if kind == "external":
        return address
    return address.with_credentials(*role_login(cluster_dir, cluster_id, role, name))


def known_connection(cluster_dir: Path, cluster_id: str) -> tuple[str, BrokerAddress]:
    """``read_connection``, or NoBrokerError naming the cluster when there is none."""
    found = read_connection(cluster_dir)
    if found is None:
        others = [path.name for path in sorted(cluster_dir.parent.glob("*"))
                  if path != cluster_dir and connection_file(path).is_file()]
        hint = f", or name one started here with --cluster ({', '.join(others[:10])})" \
            if others else ""
        raise NoBrokerError(f"no broker is known for cluster {cluster_id!r}: start the "
                            f"cluster first (clusterdeck up){hint}")
    return found


def role_login(cluster_dir: Path, cluster_id: str, role: str,
               name: str | None = None) -> tuple[str, str]:
    """The (username, password) of ``role`` (a TaskManager's: ``name``); NoBrokerError
    when there are none."""
    try:
        return load(cluster_dir, cluster_id).for_role(role, name)
    except CredentialsError as error:
        raise NoBrokerError(str(error)) from None
