"""Where a broker listens and who connects to it, as one immutable value.

A broker URL is the only thing a user types to point a process at a broker
(``clusterdeck taskmanager --broker mqtt://host:port``), so parsing refuses
anything it does not fully understand instead of guessing: a typo must fail at
start-up, not as a silent connection to the wrong place.

``mqtts://`` means TLS with the server's name checked against its certificate. The CA
to trust travels with the address (``ca_pem``), because a cluster's broker is signed by
its own CA: locally it comes from the cluster's folder, on another machine from an
exported credentials file. An ``mqtts://`` URL typed by hand has none and trusts the
system's CAs, which is right for an external broker with a public certificate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from urllib.parse import quote, unquote, urlsplit

SCHEME = "mqtt"
TLS_SCHEME = "mqtts"


@dataclass(frozen=True)
class BrokerAddress:
    """Host, port and (optionally) the login of one broker.

    The password is left out of ``repr`` so an address can be logged safely. ``tls``
    asks for an encrypted connection; ``ca_pem`` is the CA certificate (PEM) to trust
    for it, None for the system's CAs.
    """

    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    ca_pem: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.host:
            raise ValueError("a broker address needs a host")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not (
            0 < self.port <= 65535
        ):
            raise ValueError(f"a broker port is between 1 and 65535, got {self.port!r}")
        if self.password is not None and self.username is None:
            raise ValueError("a broker password needs a username")
        if self.ca_pem is not None and not self.tls:
            raise ValueError("a CA certificate only makes sense for a TLS (mqtts://) address")

    @classmethod
    def parse(cls, url: str) -> BrokerAddress:
        """Read ``mqtt[s]://[user:password@]host:port``; anything else raises ValueError."""
        if not isinstance(url, str) or not url.strip():
            raise ValueError("expected a broker URL like mqtt://127.0.0.1:1883, got nothing")
        text = url.strip()
        parts = urlsplit(text)
        if parts.scheme not in (SCHEME, TLS_SCHEME):
            raise ValueError(f"broker URL {text!r} must start with {SCHEME}:// or "
                             f"{TLS_SCHEME}://")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(f"broker URL {text!r} has a path, query or fragment; "
                             f"expected {SCHEME}://[user:password@]host:port")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"broker URL {text!r} has a bad port") from None
        if not parts.hostname:
            raise ValueError(f"broker URL {text!r} has no host")
        if port is None:
            raise ValueError(f"broker URL {text!r} has no port; expected {SCHEME}://host:port")
        username = unquote(parts.username) if parts.username is not None else None
        password = unquote(parts.password) if parts.password is not None else None
        if username == "":
            raise ValueError(f"broker URL {text!r} has an empty user name")
        return cls(parts.hostname, port, username, password,
                   tls=parts.scheme == TLS_SCHEME)

    def url(self, with_password: bool = False) -> str:
        """The address as a URL; the password only when asked for, for logs and files."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        login = ""
        if self.username is not None:
            login = quote(self.username, safe="")
            if with_password and self.password is not None:
                login += ":" + quote(self.password, safe="")
            login += "@"
        scheme = TLS_SCHEME if self.tls else SCHEME
        return f"{scheme}://{login}{host}:{self.port}"

    def with_credentials(self, username: str | None, password: str | None) -> BrokerAddress:
        """The same broker, logged in as someone else."""
        return replace(self, username=username, password=password)

    def without_credentials(self) -> BrokerAddress:
        """The same broker with no login: what may be written to a file others read."""
        return replace(self, username=None, password=None)

    def with_tls(self, ca_pem: str | None) -> BrokerAddress:
        """The same broker over TLS, trusting ``ca_pem`` (None: the system's CAs)."""
        return replace(self, tls=True, ca_pem=ca_pem)
