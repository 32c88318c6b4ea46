"""The client side of a cluster: find its leader and ask its Dispatcher.

Used by the CLI and, through the bridge, by the desktop app.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from core import protocol as p
from core import topics
from core.config import Config
from core.gateways import DispatcherGateway
from core.process import broker_address, connect_service
from core.rpc import AskTimeoutError, RpcError
from core.rpc.mqtt import MqttRpcService


class ClusterUnreachableError(RpcError):
    """No JobManager answered: the cluster is down, or still starting."""


class ClusterClient:
    def __init__(self, config: Config, broker_url: str | None = None,
                 connect_timeout: float = 10.0) -> None:
        self.config = config
        self.service: MqttRpcService = connect_service(
            config, "client", f"client-{uuid.uuid4().hex[:12]}",
            broker_address(config, "client", broker_url), connect_timeout=connect_timeout,
            with_presence=False)
        self._leader: p.LeaderInfo | None = None
        self._leader_known = threading.Event()
        self.service.subscribe(topics.LEADER, self._on_leader)

    def _on_leader(self, _topic: str, message: Any) -> None:
        if isinstance(message, p.LeaderInfo):
            self._leader = message
            self._leader_known.set()

    def leader(self, timeout: float) -> p.LeaderInfo:
        if not self._leader_known.wait(timeout) or self._leader is None:
            raise ClusterUnreachableError(
                f"no JobManager of cluster {self.config['cluster.id']!r} is known on the "
                f"broker after {timeout:g} s: is the cluster running (clusterdeck up)?")
        return self._leader

    def dispatcher(self, timeout: float = 5.0) -> DispatcherGateway:
        leader = self.leader(timeout)
        return self.service.gateway(DispatcherGateway, leader.dispatcher, leader.fencing_token)

    def cluster_overview(self, timeout: float = 5.0) -> p.ClusterOverview:
        try:
            return self.dispatcher(timeout).request_cluster_overview(timeout).result()
        except AskTimeoutError:
            raise ClusterUnreachableError(
                f"the JobManager of cluster {self.config['cluster.id']!r} did not answer "
                f"within {timeout:g} s") from None

    def close(self) -> None:
        self.service.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
