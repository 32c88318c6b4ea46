"""One typed gateway per endpoint: the calls it accepts, and how (tell or ask)."""

from __future__ import annotations

from concurrent.futures import Future

from core import protocol as p
from core.rpc import Gateway


class ResourceManagerGateway(Gateway):
    def register_task_manager(self, msg: p.RegisterTaskManager,
                              timeout: float | None = None) -> Future[p.RegistrationResponse]:
        return self.ask(msg, timeout)

    def heartbeat_from_task_manager(self, msg: p.TaskManagerHeartbeat) -> None:
        self.tell_heartbeat(msg)

    def request_cluster_overview(self) -> Future[p.ClusterOverview]:
        return self.ask(p.RequestClusterOverview())


class TaskExecutorGateway(Gateway):
    def heartbeat_from_resource_manager(self, msg: p.ResourceManagerHeartbeat) -> None:
        self.tell_heartbeat(msg)

    def disconnect(self, msg: p.DisconnectTaskManager) -> None:
        self.tell(msg)


class DispatcherGateway(Gateway):
    def request_cluster_overview(self, timeout: float | None = None
                                 ) -> Future[p.ClusterOverview]:
        return self.ask(p.RequestClusterOverview(), timeout)
