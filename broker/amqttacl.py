"""broker/acl.py's table, enforced inside amqtt as Mosquitto enforces it.

amqtt's own ``TopicAccessControlListPlugin`` knows no per-client patterns and does not
check last wills, so with it a client of one role could read every reply of that role
and any login could leave a forged retained record (``state/leader``) as its will. This
plugin takes the same per-login filters as Mosquitto's acl_file, puts the session's
client id in place of ``%c``, and checks every subscription, every publish, every
delivery and every will (at login: a will the login could not publish refuses it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amqtt.contexts import Action, BaseContext
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin
from amqtt.session import Session

from clusterdeck.broker.acl import MQTT_CLIENT_ID, filter_covers


def permitted(filters: list[str], topic: str, client_id: str) -> bool:
    """Whether ``topic`` (a topic, or a subscription's filter) lies within a filter."""
    return any(filter_covers(allowed.replace(MQTT_CLIENT_ID, client_id), topic)
               for allowed in filters)


@dataclass
class AclConfig:
    subscribe: dict[str, list[str]] = field(default_factory=dict)
    publish: dict[str, list[str]] = field(default_factory=dict)


class ClusterTopicAcl(BaseTopicPlugin):
    """Subscribe and receive against ``subscribe``, publish against ``publish``."""

    Config = AclConfig

    def __init__(self, context: BaseContext) -> None:
        super().__init__(context)
        self.acl: AclConfig = context.config  # type: ignore[assignment]

    async def topic_filtering(self, *, session: Session | None = None,
                              topic: str | None = None, action: Action | None = None
                              ) -> bool:
        if session is None or not topic or not session.username:
            return False
        table = self.acl.publish if action == Action.PUBLISH else self.acl.subscribe
        return permitted(table.get(session.username, []), topic, session.client_id or "")


class ClusterWillCheck(BaseAuthPlugin):
    """Refuses a login whose last will it could not publish; says nothing otherwise (the
    password check is amqtt's FileAuthPlugin)."""

    Config = AclConfig

    def __init__(self, context: BaseContext) -> None:
        super().__init__(context)
        self.acl: AclConfig = context.config  # type: ignore[assignment]

    async def authenticate(self, *, session: Session) -> bool | None:
        if not session.will_flag:
            return None
        allowed = self.acl.publish.get(session.username or "", [])
        if permitted(allowed, session.will_topic or "", session.client_id or ""):
            return None
        self.context.logger.warning("refused %r: its last will on %r is not its to publish",
                                    session.username, session.will_topic)
        return False
