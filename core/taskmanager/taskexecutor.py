"""The TaskExecutor: registers at the leading ResourceManager and keeps that registration.

It learns who leads from the retained ``state/leader`` topic, registers with backoff until
an answer comes, then heartbeats both ways. It registers again whenever the leader
changes, its JobManager's process goes offline, the ResourceManager stops answering
heartbeats, or the ResourceManager says it does not know it (e.g. after a hang).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import psutil

from core import protocol as p
from core import topics
from core.config import Config
from core.gateways import ResourceManagerGateway
from core.heartbeat import HeartbeatMonitor
from core.rpc import RpcEndpoint, handler
from core.taskmanager.slots import SlotTable

log = logging.getLogger(__name__)
RESOURCE_MANAGER = "resourcemanager"


def endpoint_id_of(resource_id: str) -> str:
    return f"taskexecutor.{resource_id}"


class TaskExecutor(RpcEndpoint):
    def __init__(self, config: Config, resource_id: str, instance_id: str,
                 on_refused: Callable[[str], None] | None = None) -> None:
        super().__init__(endpoint_id_of(resource_id))
        self.config = config
        self.resource_id = resource_id
        self.instance_id = instance_id
        self.slots = SlotTable(config["taskmanager.slots"])
        self.leader: p.LeaderInfo | None = None
        self.registration: p.AcknowledgeRegistration | p.AlreadyRegistered | None = None
        self.interval: float = config["heartbeat.interval"]
        self._leader_heartbeats: HeartbeatMonitor[None] = HeartbeatMonitor.from_config(config)
        self._backoff: float = config["registration.initial-backoff"]
        self._attempt = 0
        self._retry_pending = False
        self._on_refused = on_refused
        self._os_process = psutil.Process()

    def on_start(self) -> None:
        """Main thread: follow the leader and the JobManager's presence, start heartbeats."""
        service = self.rpc_service
        service.subscribe(topics.LEADER, lambda _t, m: self.run_async(self._on_leader, m))
        service.subscribe(topics.presence("jobmanager"),
                          lambda _t, m: self.run_async(self._on_jobmanager_presence, m))
        self._heartbeat_round()

    @property
    def is_registered(self) -> bool:
        return self.registration is not None

    # -- leader and registration ------------------------------------------------------------

    def _on_leader(self, leader: Any) -> None:
        if not isinstance(leader, p.LeaderInfo):
            return
        if self.leader and leader.fencing_token == self.leader.fencing_token:
            return
        log.info("new leader: JobManager pid %d on %s", leader.pid, leader.host)
        self.leader = leader
        self._reset_registration()
        self._register()

    def _on_jobmanager_presence(self, presence: Any) -> None:
        if isinstance(presence, p.Presence) and presence.status is p.PresenceStatus.OFFLINE:
            if self.registration is not None:
                log.warning("JobManager went offline; registering again when one answers")
            self._reset_registration()
            self._schedule_retry()

    def _reset_registration(self) -> None:
        self.registration = None
        self._leader_heartbeats.unmonitor(RESOURCE_MANAGER)
        self._attempt += 1
        self._backoff = self.config["registration.initial-backoff"]

    def _register(self) -> None:
        if self.leader is None or self.registration is not None:
            return
        attempt = self._attempt
        request = p.RegisterTaskManager(
            cluster_id=self.config["cluster.id"], protocol_version=p.PROTOCOL_VERSION,
            resource_id=self.resource_id, instance_id=self.instance_id,
            endpoint_id=self.endpoint_id, host=socket.gethostname(), pid=os.getpid(),
            slot_report=self.slots.report())
        timeout = min(self.config["rpc.ask-timeout"], max(1.0, self._backoff * 4))
        future = self._rm_gateway().register_task_manager(request, timeout)
        self.on_main_thread(future, lambda answer, error: self._on_registration_answer(
            attempt, answer, error))

    def _on_registration_answer(self, attempt: int, answer: Any,
                                error: BaseException | None) -> None:
        if attempt != self._attempt or self.registration is not None:
            return  # an answer to an attempt made for an earlier leader
        if isinstance(answer, p.AcknowledgeRegistration | p.AlreadyRegistered):
            self.registration = answer
            self._backoff = self.config["registration.initial-backoff"]
            self._leader_heartbeats.monitor(RESOURCE_MANAGER, time.monotonic())
            log.info("registered at %s as %s", answer.resource_manager, self.resource_id)
            return
        if isinstance(answer, p.RefuseRegistration):
            log.error("registration refused: %s", answer.reason)
            if self._on_refused is not None:
                self._on_refused(answer.reason)
                return
        else:
            log.info("registration attempt failed (%s); retrying in %.1f s", error,
                     self._backoff)
        self._schedule_retry()

    def _schedule_retry(self) -> None:
        if self._retry_pending:
            return
        self._retry_pending = True
        delay = self._backoff
        self._backoff = min(self._backoff * 2, self.config["registration.max-backoff"])

        def retry() -> None:
            self._retry_pending = False
            self._register()
        self.schedule(delay, retry)

    def _rm_gateway(self) -> ResourceManagerGateway:
        assert self.leader is not None
        token = self.registration.fencing_token if self.registration else None
        return self.rpc_service.gateway(ResourceManagerGateway, self.leader.resource_manager,
                                        token or self.leader.fencing_token)

    # -- liveness ---------------------------------------------------------------------------------

    @handler(p.ResourceManagerHeartbeat)
    def heartbeat_from_resource_manager(self, heartbeat: p.ResourceManagerHeartbeat) -> None:
        if self.registration and heartbeat.registration_id == self.registration.registration_id:
            self._leader_heartbeats.receive(RESOURCE_MANAGER, None, time.monotonic())

    @handler(p.DisconnectTaskManager)
    def disconnect(self, msg: p.DisconnectTaskManager) -> None:
        log.warning("the ResourceManager disconnected us: %s", msg.reason)
        self._reset_registration()
        self._register()

    def _heartbeat_round(self) -> None:
        now = time.monotonic()
        if self._leader_heartbeats.lost_targets(now):
            log.warning("the ResourceManager stopped answering heartbeats; registering again")
            self._reset_registration()
            self._register()
        if self.registration is not None:
            self._rm_gateway().heartbeat_from_task_manager(p.TaskManagerHeartbeat(
                self.resource_id, self.registration.registration_id, self.slots.report(),
                cpu_percent=self._os_process.cpu_percent(None),
                memory_bytes=self._os_process.memory_info().rss))
        self.schedule(self.interval, self._heartbeat_round)
