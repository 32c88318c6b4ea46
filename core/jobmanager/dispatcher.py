"""The Dispatcher: the JobManager's front door for clients."""

from __future__ import annotations

from concurrent.futures import Future

from core import protocol as p
from core.gateways import ResourceManagerGateway
from core.rpc import FencedRpcEndpoint, handler

ENDPOINT_ID = "dispatcher"


class Dispatcher(FencedRpcEndpoint):
    def __init__(self, resource_manager: ResourceManagerGateway,
                 fencing_token: str | None = None) -> None:
        super().__init__(ENDPOINT_ID, fencing_token)
        self.resource_manager = resource_manager

    @handler(p.RequestClusterOverview, fenced=False)
    def request_cluster_overview(self, _request: p.RequestClusterOverview
                                 ) -> Future[p.ClusterOverview]:
        return self.resource_manager.request_cluster_overview()
