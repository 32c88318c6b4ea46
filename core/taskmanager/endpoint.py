"""What the TaskExecutor's collaborators use of it: its main thread (``MainThread``, as the
JobMaster's collaborators see theirs) and its transport.

The registration, the state updates, the Spark host, the slot queue and the ticks each
keep their state on the TaskExecutor's main thread; this narrow protocol is all they see
of the endpoint, so a unit test drives them with a fake and no MQTT.
"""

from __future__ import annotations

from typing import Protocol

from clusterdeck.core.rpc import MainThread, RpcService


class Endpoint(MainThread, Protocol):
    """The TaskExecutor, as its collaborators see it (``RpcEndpoint``'s own members)."""

    endpoint_id: str

    @property
    def rpc_service(self) -> RpcService: ...
