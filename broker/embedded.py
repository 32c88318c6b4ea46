"""The pure-Python amqtt broker, run inside this process when Mosquitto is missing.

Its config is always built here: amqtt's default is a 0.0.0.0 listener open to
anonymous clients. Logins are checked against an argon2 password file generated
from the cluster's credentials; each login's topics come from broker/acl.py's table,
enforced by our own plugins (broker/amqttacl.py) with the same per-login filters as
Mosquitto's acl_file, client ids and last wills included. Every cluster runs its own
broker with only its own users in it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from amqtt.broker import Broker
from amqtt.contexts import Action
from amqtt.session import Session
from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher

from clusterdeck.broker.acl import amqtt_acl
from clusterdeck.broker.credentials import Credentials
from clusterdeck.broker.tls import TlsFiles

PASSWORD_NAME = "amqtt.passwd"

_AUTH_PLUGIN = "amqtt.plugins.authentication.FileAuthPlugin"
_ACL_PLUGIN = "clusterdeck.broker.amqttacl.ClusterTopicAcl"
_WILL_PLUGIN = "clusterdeck.broker.amqttacl.ClusterWillCheck"

log = logging.getLogger(__name__)


def write_password_file(path: Path, credentials: Credentials) -> None:
    """``username:argon2-hash`` lines, mode 0600, replaced whole."""
    # The passwords are long random tokens, not words a person chose: a cheap argon2 loses
    # nothing against guessing, and amqtt checks every login inside its event loop, where
    # the default cost (about a second under load) stalls every other client.
    hasher = PasswordHash((Argon2Hasher(time_cost=1, memory_cost=8 * 1024, parallelism=1),))
    text = "".join(f"{username}:{hasher.hash(password)}\n"
                   for username, password in credentials.items())
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.replace(temporary, path)


def broker_config(*, host: str, port: int, password_file: Path,
                  credentials: Credentials, tls: TlsFiles | None = None) -> dict[str, Any]:
    """The amqtt 0.12 config: one TCP listener, file logins, per-user topic ACLs.

    With ``tls`` the listener speaks TLS only (amqtt's ``ssl`` listener keys). amqtt
    builds the server context with ``ssl.create_default_context``, whose minimum is
    TLS 1.2; no client certificate is asked for, logins are still passwords.
    """
    if not host:
        raise ValueError("the embedded broker needs an explicit host to listen on")
    bind_host = f"[{host}]" if ":" in host else host
    subscribe, publish = amqtt_acl(credentials.cluster_id, list(credentials.all_logins()))
    tables = {"subscribe": subscribe, "publish": publish}
    return {
        "listeners": {"default": _listener(f"{bind_host}:{port}", tls)},
        "plugins": {
            _AUTH_PLUGIN: {"password_file": str(password_file)},
            _WILL_PLUGIN: tables,
            _ACL_PLUGIN: tables,
        },
    }


def _listener(bind: str, tls: TlsFiles | None) -> dict[str, Any]:
    listener: dict[str, Any] = {"type": "tcp", "bind": bind}
    if tls is not None:
        listener.update(ssl=True, certfile=str(tls.cert_file), keyfile=str(tls.key_file))
    return listener


class _Subscriptions(dict[str, list[tuple[Session, int]]]):
    """amqtt 0.12.1 broadcasts a message by iterating its subscriptions while it awaits
    the topic plugins (our ACL) for each subscriber; a client subscribing meanwhile
    changes the dict, the iteration raises "dictionary changed size during iteration"
    and the message is lost for every subscriber not reached yet. Seen as a job stuck
    RUNNING for good. A client that connects iterates the topics the same way, to send it
    their retained messages; there the error ends the new client's connection (seen as
    `clusterdeck status` losing the broker right after `up`). ``items()`` and iterating
    the topics (the two iterations across an await) give a snapshot."""

    def items(self) -> list[tuple[str, list[tuple[Session, int]]]]:  # type: ignore[override]
        return [(topic, list(subscribers)) for topic, subscribers in super().items()]

    def __iter__(self) -> Iterator[str]:
        return iter(list(super().keys()))


class ClusterBroker(Broker):
    """amqtt's broker, but a retained message goes to a new subscriber only if its login
    may receive it: 0.12.1 sends the retained messages matching a subscription without
    asking the topic plugins (its live messages it does ask, as RECEIVE). This is that
    method of amqtt 0.12.1 (pinned in pyproject.toml) with the check added. And its
    broadcasts survive subscriptions made while they run (``_Subscriptions``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._subscriptions = _Subscriptions(self._subscriptions)

    async def _publish_retained_messages_for_subscription(
            self, subscription: tuple[str, int], session: Session) -> None:
        topic_filter, qos = subscription
        handler = self._get_handler(session)
        tasks = []
        for topic, retained in list(self._retained_messages.items()):
            if handler and self._matches(topic, topic_filter) and \
                    await self._topic_filtering(session, topic, Action.RECEIVE):
                tasks.append(asyncio.create_task(handler.mqtt_publish(
                    retained.topic, retained.data, min(qos, retained.qos or qos),
                    retain=True)))
        if tasks:
            await asyncio.wait(tasks)


async def serve(config: dict[str, Any], stop: asyncio.Event) -> None:
    """Run the broker on the running loop until ``stop`` is set, then shut it down."""
    broker = ClusterBroker(config)
    await broker.start()
    log.info("amqtt broker listening on %s", config["listeners"]["default"]["bind"])
    try:
        await stop.wait()
    finally:
        await broker.shutdown()
        log.info("amqtt broker stopped")


def run(config: dict[str, Any]) -> int:
    """Serve in this (main) thread until SIGTERM or SIGINT; 0 after a clean stop.

    Log lines go to stdout (the supervisor's log file): ours from INFO, amqtt's and
    its state machine's (per-connection chatter) from WARNING only.
    """
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await serve(config, stop)

    asyncio.run(main())
    return 0
