"""The TaskExecutor's registration at the leading ResourceManager, and its heartbeats.

It learns who leads from the retained ``state/leader`` topic, registers with backoff until
an answer comes, then heartbeats both ways. It registers again whenever the leader
changes, its JobManager's process goes offline, the ResourceManager stops answering
heartbeats, or the ResourceManager says it does not know it (e.g. after a hang). Each of
these but the first registration fails the running tasks: their JobMaster is gone or has
failed them already. Flink's ``TaskExecutor`` keeps the same with its
``ResourceManagerLeaderListener`` and ``HeartbeatManager``.

Main thread of the TaskExecutor only (``Endpoint``): no locks.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import psutil

from clusterdeck.core.config.settings import Config
from clusterdeck.core.heartbeat import HeartbeatMonitor
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.fencing import EpochFence
from clusterdeck.core.protocol.gateways import ResourceManagerGateway
from clusterdeck.core.taskmanager.dataplane import DataPlane
from clusterdeck.core.taskmanager.endpoint import Endpoint

log = logging.getLogger(__name__)
RESOURCE_MANAGER = "resourcemanager"


class Registration:
    """Who leads, whether this TaskManager is registered there, and the heartbeats.

    ``slot_report()``: the slots as they are now, for the registration and each heartbeat;
    ``fail_tasks(why)``: cancels the running tasks when their JobMaster is lost;
    ``registered(answer)``: told of each registration that was acknowledged;
    ``on_refused(reason)``: told when the ResourceManager refuses this TaskManager for
    good (without it, registering goes on with backoff)."""

    def __init__(self, endpoint: Endpoint, config: Config, resource_id: str,
                 instance_id: str, data_plane: DataPlane | None,
                 slot_report: Callable[[], p.SlotReport], fail_tasks: Callable[[str], None],
                 registered: Callable[[p.AcknowledgeRegistration | p.AlreadyRegistered], None],
                 on_refused: Callable[[str], None] | None = None) -> None:
        self._endpoint = endpoint
        self._config = config
        self._resource_id = resource_id
        self._instance_id = instance_id
        self._data_plane = data_plane
        self._slot_report = slot_report
        self._fail_tasks = fail_tasks
        self._registered = registered
        self._on_refused = on_refused
        self.leader: p.LeaderInfo | None = None
        self.fence = EpochFence("TaskManager")  # the leader epochs seen (docs/ha.md)
        self.answer: p.AcknowledgeRegistration | p.AlreadyRegistered | None = None
        self._heartbeats: HeartbeatMonitor[None] = HeartbeatMonitor.from_config(config)
        self._backoff: float = config["registration.initial-backoff"]
        self._attempt = 0
        self._retry_pending = False
        self._os_process = psutil.Process()

    @property
    def is_registered(self) -> bool:
        return self.answer is not None

    def on_leader(self, leader: Any) -> None:
        if not isinstance(leader, p.LeaderInfo):
            return
        if self.leader and leader.fencing_token == self.leader.fencing_token:
            return
        if self.fence.admit(leader.fencing_token,
                            f"the leader record of JobManager pid {leader.pid} on {leader.host}"):
            return
        log.info("new leader: JobManager pid %d on %s", leader.pid, leader.host)
        if self.leader is not None:
            self._fail_tasks("their JobManager was replaced")
        self.leader = leader
        self._reset()
        self._register()

    def on_jobmanager_presence(self, presence: Any) -> None:
        if isinstance(presence, p.Presence) and presence.status is p.PresenceStatus.OFFLINE:
            if self.answer is not None:
                log.warning("JobManager went offline; registering again when one answers")
            self._fail_tasks("their JobManager went offline")
            self._reset()
            self._schedule_retry()

    def heartbeat_received(self, heartbeat: p.ResourceManagerHeartbeat) -> None:
        if self.answer and heartbeat.registration_id == self.answer.registration_id:
            self._heartbeats.receive(RESOURCE_MANAGER, None, time.monotonic())

    def disconnected(self, reason: str) -> None:
        if self.answer is None:
            # Registering again already: the ResourceManager answers each heartbeat queued
            # during a cut with a disconnect, and each would otherwise start one more round.
            log.debug("a disconnect while registering again, ignored: %s", reason)
            return
        log.warning("the ResourceManager disconnected us: %s", reason)
        # Declared lost: the JobMasters failed these tasks and will refuse their updates.
        self._fail_tasks("this TaskManager was declared lost")
        self._reset()
        self._register()

    def heartbeat_round(self) -> None:
        """Each heartbeat interval: register again if the ResourceManager stopped
        answering, else tell it this TaskManager lives, with its slots and load."""
        if self._heartbeats.lost_targets(time.monotonic()):
            log.warning("the ResourceManager stopped answering heartbeats; registering again")
            self._fail_tasks("the ResourceManager stopped answering")
            self._reset()
            self._register()
        if self.answer is not None:
            self._gateway().heartbeat_from_task_manager(p.TaskManagerHeartbeat(
                self._resource_id, self.answer.registration_id, self._slot_report(),
                cpu_percent=self._os_process.cpu_percent(None),
                memory_bytes=self._os_process.memory_info().rss, wall_time=time.time()))

    def _reset(self) -> None:
        self.answer = None
        self._heartbeats.unmonitor(RESOURCE_MANAGER)
        self._attempt += 1
        self._backoff = self._config["registration.initial-backoff"]

    def _register(self) -> None:
        if self.leader is None or self.answer is not None:
            return
        attempt = self._attempt
        request = p.RegisterTaskManager(
            cluster_id=self._config["cluster.id"], protocol_version=p.PROTOCOL_VERSION,
            resource_id=self._resource_id, instance_id=self._instance_id,
            endpoint_id=self._endpoint.endpoint_id, host=socket.gethostname(),
            pid=os.getpid(), slot_report=self._slot_report(), **self._data_service())
        timeout = min(self._config["rpc.ask-timeout"], max(1.0, self._backoff * 4))
        future = self._gateway().register_task_manager(request, timeout)
        self._endpoint.on_main_thread(future, lambda answer, error: self._answered(
            attempt, answer, error))

    def _data_service(self) -> dict[str, str]:
        """What the registration announces of the data service (nothing without one)."""
        plane = self._data_plane
        if plane is None:
            return {}
        return {"data_url": plane.address.url, "data_fingerprint": plane.address.fingerprint,
                "data_key": plane.key, "stream_address": plane.stream_address}

    def _answered(self, attempt: int, answer: Any, error: BaseException | None) -> None:
        if attempt != self._attempt or self.answer is not None:
            return  # an answer to an attempt made for an earlier leader
        if isinstance(answer, p.AcknowledgeRegistration | p.AlreadyRegistered):
            self.answer = answer
            self._backoff = self._config["registration.initial-backoff"]
            self._heartbeats.monitor(RESOURCE_MANAGER, time.monotonic())
            log.info("registered at %s as %s", answer.resource_manager, self._resource_id)
            self._registered(answer)
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
        self._backoff = min(self._backoff * 2, self._config["registration.max-backoff"])
        self._endpoint.schedule(delay, self._retry)

    def _retry(self) -> None:
        self._retry_pending = False
        self._register()

    def _gateway(self) -> ResourceManagerGateway:
        assert self.leader is not None
        token = self.answer.fencing_token if self.answer else None
        return self._endpoint.rpc_service.gateway(
            ResourceManagerGateway, self.leader.resource_manager,
            token or self.leader.fencing_token)
