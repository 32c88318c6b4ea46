"""The ResourceManager: knows every TaskManager and slot, and notices when one is lost.

A loss is seen two ways: the TaskManager's last will on its retained presence topic
(the broker publishes it within milliseconds of the process dying), or the phi-accrual
detector on its heartbeats (the only way to see a hung process, and the only way at all
on amqtt, which never enforces keepalive).

What it publishes stays bounded however many TaskManagers come and go: registrations
beyond ``resourcemanager.max-taskmanagers`` are refused, lost TaskManagers are forgotten
after ``resourcemanager.lost-taskmanager-retention`` or beyond
``resourcemanager.max-lost-taskmanagers``, and the overview is published at most every
``SNAPSHOT_DELAY`` (a thousand TaskManagers starting at once would otherwise encode it a
thousand times).

With a resource provider (``elastic.provider``) it is Flink's active ResourceManager: the
``ElasticPlanner`` decides which TaskManagers to start for slot requests beyond the free
slots and which idle ones to stop, and the decision goes out retained as a
``TaskManagerDemand`` for the provider to carry out (docs/elastic.md).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from clusterdeck.core.config.settings import Config
from clusterdeck.core.heartbeat import HeartbeatMonitor
from clusterdeck.core.jobmanager.elastic import ElasticLimits, ElasticPlanner, TaskManagerLoad
from clusterdeck.core.jobmanager.listings import fitted_overview
from clusterdeck.core.jobmanager.slotpool import PendingRequest, SlotPool
from clusterdeck.core.jobmanager.taskmanagers import Registration, TaskManagerRegistry
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.elastic import START_FAILURE_CHARS
from clusterdeck.core.protocol.fencing import epoch_of
from clusterdeck.core.protocol.gateways import (
    JobMasterGateway,
    ResourceManagerGateway,
    TaskExecutorGateway,
)
from clusterdeck.core.rpc import FencedRpcEndpoint, handler

log = logging.getLogger(__name__)
ENDPOINT_ID = "resourcemanager"
LossListener = Callable[[str, str], None]
SNAPSHOT_DELAY = 0.05  # seconds a change waits for the next ones before the overview goes out
OFFERS_PER_MESSAGE = 64  # slot offers in one OfferSlots
# Heartbeat intervals with no TaskManager heard from, one of them past its timeout, after
# which this JobManager doubts its own broker link; and for which a round trip through the
# broker then vouches for it. Two: one interval of jitter is common under load.
LINK_QUIET = 2


class ResourceManager(FencedRpcEndpoint):
    def __init__(self, config: Config, fencing_token: str | None = None,
                 leader_cause: str = "") -> None:
        super().__init__(ENDPOINT_ID, fencing_token)
        self.leader_cause = leader_cause  # how this JobManager came to lead, for the overview
        self.cluster_id = config["cluster.id"]
        self.spark_properties = config.spark_properties()  # handed to each TaskManager
        self.interval: float = config["heartbeat.interval"]
        self.registry = TaskManagerRegistry(self.cluster_id,
                                            config["resourcemanager.max-taskmanagers"])
        self.lost_retention: float = config["resourcemanager.lost-taskmanager-retention"]
        self.max_lost: int = config["resourcemanager.max-lost-taskmanagers"]
        self.framesize: int = config["rpc.framesize"]
        self._snapshot_due = False
        self.slots = SlotPool()
        self.heartbeats: HeartbeatMonitor[p.SlotReport] = HeartbeatMonitor.from_config(config)
        self._loss_listeners: list[LossListener] = []
        self.standbys: tuple[str, ...] = ()  # the JobManagers waiting to take over
        self.elastic = (ElasticPlanner(ElasticLimits.from_config(config))
                        if config["elastic.provider"] != "none" else None)
        self._demand: p.TaskManagerDemand | None = None  # the last one published
        self._retry_at = (0.0, 0.0)  # the planner's retry_at (monotonic), and as wall clock
        self._link_check_pending = False  # an ask to itself through the broker under way
        self._link_confirmed_at = -math.inf  # monotonic: when that ask last came back

    def on_start(self) -> None:
        """Main thread: watch presence, then start the heartbeat rounds."""
        self.rpc_service.subscribe(
            topics.PRESENCE_ALL, lambda topic, msg: self.run_async(self._on_presence, topic, msg))
        self._publish_snapshot()
        self._heartbeat_round()  # plans too: a new leader's demand replaces the old one's

    def add_loss_listener(self, listener: LossListener) -> None:
        """``listener(resource_id, cause)`` runs on this endpoint's main thread."""
        self._loss_listeners.append(listener)

    # -- registration ---------------------------------------------------------------------------

    @handler(p.RegisterTaskManager, fenced=False, sender_field="resource_id")
    def register_task_manager(self, request: p.RegisterTaskManager) -> p.RegistrationResponse:
        reason = self.registry.refusal(request)
        if reason:
            log.warning("refused TaskManager %s: %s", request.resource_id, reason)
            return p.RefuseRegistration(reason)
        previous = self.registry.get(request.resource_id)
        if (previous and previous.is_registered
                and previous.request.instance_id != request.instance_id):
            self._lose(request.resource_id, "replaced by a new instance", "re-registration")
        outcome, registration = self.registry.register(request, time.time())
        assert registration is not None
        if outcome == "already":
            return p.AlreadyRegistered(registration.registration_id, self.endpoint_id,
                                       self.fencing_token, self.interval,
                                       self.spark_properties)
        self.heartbeats.monitor(request.resource_id, time.monotonic())
        busy = {s.index for s in request.slot_report.slots if s.allocation_id is not None}
        self.slots.add_taskmanager(request.resource_id, len(request.slot_report.slots), busy,
                                   request.slot_report.spark_ready)
        if self.elastic is not None:
            self.elastic.registered(request.resource_id)
        self.run_async(self._assign_slots)
        log.info("TaskManager %s registered (%s, pid %d, %d slots)", request.resource_id,
                 request.host, request.pid, len(request.slot_report.slots))
        self.rpc_service.publish(topics.CLUSTER_EVENTS,
                                 p.TaskManagerRegistered(self._info(registration)))
        self._publish_snapshot()
        return p.AcknowledgeRegistration(registration.registration_id, self.endpoint_id,
                                         self.fencing_token, self.interval,
                                         self.spark_properties)

    # -- liveness -------------------------------------------------------------------------------

    @handler(p.TaskManagerHeartbeat, sender_field="resource_id")
    def heartbeat_from_task_manager(self, heartbeat: p.TaskManagerHeartbeat) -> None:
        registration = self.registry.get(heartbeat.resource_id)
        before = registration.slot_report if registration else None
        if not self.registry.accept_heartbeat(heartbeat, time.time()):
            self._disconnect(heartbeat.resource_id, "not registered at this ResourceManager")
            return
        self.heartbeats.receive(heartbeat.resource_id, heartbeat.slot_report, time.monotonic())
        free = {s.index for s in heartbeat.slot_report.slots if s.allocation_id is None}
        if self.slots.report(heartbeat.resource_id, free, heartbeat.slot_report.spark_ready):
            self._assign_slots()
        if before != heartbeat.slot_report:
            self._publish_snapshot()

    def _heartbeat_round(self) -> None:
        now = time.monotonic()
        lost = [] if self._own_link_in_doubt(now) else self.heartbeats.lost_targets(now)
        for resource_id in lost:
            age = self.heartbeats.heartbeat_age(resource_id, now) or 0.0
            self._lose(resource_id, f"no heartbeat for {age:.1f} s", "heartbeat timeout")
        self._forget_lost()
        self._plan()
        for registration in self.registry.registered():
            self._gateway(registration).heartbeat_from_resource_manager(
                p.ResourceManagerHeartbeat(registration.registration_id, self.fencing_token))
        self._publish_snapshot()
        self.schedule(self.interval, self._heartbeat_round)

    def _own_link_in_doubt(self, now: float) -> bool:
        """Main thread: every TaskManager silent together looks like this JobManager's own
        broker link down (cut off, it would declare them all lost and their finished work
        with them), not like all of them failing together. Before declaring any, one ask
        through the broker to this endpoint itself must come back; until it does, none
        is declared, and a TaskManager that really died still is once the link is
        confirmed (its last will, when the broker saw it die, at once)."""
        if not self.heartbeats.all_quiet(now, LINK_QUIET * self.interval) or \
                now - self._link_confirmed_at <= LINK_QUIET * self.interval:
            return False
        if not self._link_check_pending:
            self._link_check_pending = True
            self.on_main_thread(self.rpc_service.gateway(
                ResourceManagerGateway, self.endpoint_id).request_cluster_overview(),
                self._link_checked)
        return True

    def _link_checked(self, _overview: p.ClusterOverview | None,
                      error: BaseException | None) -> None:
        self._link_check_pending = False
        if error is None:
            self._link_confirmed_at = time.monotonic()
            return
        log.warning("no TaskManager heard from, and this JobManager's own ask through the "
                    "broker went unanswered (%s): its broker link is down, so none is "
                    "declared lost until it is back", error)

    def _on_presence(self, topic: str, presence: Any) -> None:
        """A TaskManager's will. Believed only on that TaskManager's own presence topic,
        which the broker lets no other login write (broker/acl.py)."""
        if (isinstance(presence, p.Presence) and presence.role == "taskmanager"
                and presence.status is p.PresenceStatus.OFFLINE
                and topic == topics.presence(presence.service_id)):
            self._lose(presence.service_id, "process exited", "last will",
                       presence.instance_id)

    def _lose(self, resource_id: str, cause: str, detected_by: str,
              instance_id: str | None = None) -> None:
        registration = self.registry.get(resource_id)
        stopped = (self.elastic.stopping.get(resource_id) if self.elastic is not None
                   and registration is not None and registration.is_registered else None)
        if stopped is not None:  # went as asked: the cause is why it was stopped
            cause, detected_by = stopped, "elastic"
        detail = f"{cause} (detected by {detected_by})"
        registration = self.registry.mark_lost(
            resource_id, f"TaskManager {resource_id} lost: {detail}", instance_id, time.time())
        if registration is None:
            return
        if self.elastic is not None:
            self.elastic.lost(resource_id)
        self.heartbeats.unmonitor(resource_id)
        self.slots.remove_taskmanager(resource_id)
        log.warning("%s", registration.lost_cause)
        self.rpc_service.publish(topics.CLUSTER_EVENTS, p.TaskManagerLost(
            resource_id, detail, detected_by, time.time()))
        self._forget_lost()
        self._publish_snapshot()
        for listener in self._loss_listeners:
            listener(resource_id, registration.lost_cause)
        self._plan()

    def _forget_lost(self) -> None:
        gone = self.registry.forget_lost(time.time(), self.lost_retention, self.max_lost)
        if gone:
            log.info("forgot %d lost TaskManager(s): %s", len(gone), ", ".join(gone[:10]))
            self._publish_snapshot()

    def _disconnect(self, resource_id: str, reason: str) -> None:
        registration = self.registry.get(resource_id)
        if registration is not None:
            self._gateway(registration).disconnect(p.DisconnectTaskManager(resource_id, reason))

    def _gateway(self, registration: Registration) -> TaskExecutorGateway:
        """Its messages carry this leader's token, whose epoch the TaskExecutor checks."""
        return self.rpc_service.gateway(TaskExecutorGateway, registration.request.endpoint_id,
                                        self.fencing_token)

    # -- slots -----------------------------------------------------------------------------------

    @handler(p.SlotRequests, senders=(topics.JOBMANAGER,))
    def slot_requests(self, batch: p.SlotRequests) -> None:
        for request in batch.requests:
            self.slots.request(PendingRequest(request.job_id, request.allocation_id,
                                              request.jobmaster, frozenset(request.blocked)))
        for free in batch.frees:
            self.slots.free(free.allocation_id)
        self._assign_slots()

    @handler(p.ReleaseJobSlots, senders=(topics.JOBMANAGER,))
    def release_job_slots(self, request: p.ReleaseJobSlots) -> None:
        self.slots.release_job(request.job_id)
        self._assign_slots()

    def _assign_slots(self) -> None:
        """Offer what is free to the oldest requests, one OfferSlots per JobMaster."""
        made = self.slots.assign()
        offers: dict[str, list[p.OfferSlot]] = {}
        for allocation in made:
            registration = self.registry.get(allocation.slot.resource_id)
            assert registration is not None
            registered = registration.request
            offers.setdefault(allocation.request.jobmaster, []).append(p.OfferSlot(
                allocation.request.allocation_id, allocation.slot.resource_id,
                registered.endpoint_id, registered.host, allocation.slot.index,
                registered.data_url, registered.data_fingerprint, registered.data_key,
                registered.stream_address))
        for jobmaster, batch in offers.items():
            gateway = self.rpc_service.gateway(JobMasterGateway, jobmaster, self.fencing_token)
            for start in range(0, len(batch), OFFERS_PER_MESSAGE):
                gateway.offer_slots(p.OfferSlots(tuple(batch[start:start + OFFERS_PER_MESSAGE])))
        if made:
            self._publish_snapshot()
        self._plan()

    # -- the active ResourceManager -----------------------------------------------------------

    @handler(p.TaskManagerStartFailed, sender_field="resource_id")
    def taskmanager_start_failed(self, report: p.TaskManagerStartFailed) -> None:
        """From the provider, speaking with the failed TaskManager's own login."""
        cause = report.cause[:START_FAILURE_CHARS]
        if self.elastic is None or not self.elastic.start_failed(
                report.resource_id, cause, time.monotonic()):
            log.info("ignored a failed start of %s: not asked for", report.resource_id)
            return
        log.warning("TaskManager %s failed to start: %s", report.resource_id, cause)
        self._plan()

    def _plan(self) -> None:
        """Main thread: let the planner decide on the pool as it is now, then publish the
        demand if it changed. Stopped TaskManagers' slots leave the pool at once, so no
        request is offered a slot that is going away."""
        if self.elastic is None:
            return
        live = [TaskManagerLoad(r.resource_id, len(r.slot_report.slots),
                                self.slots.free_count(r.resource_id))
                for r in self.registry.registered() if r.resource_id not in self.elastic.stopping]
        decision = self.elastic.decide(time.monotonic(), self.slots.pending, live,
                                       {r.resource_id for r in self.registry.all()})
        for name in decision.stop:
            self.slots.remove_taskmanager(name)
        if decision:
            log.info("elastic: start %s, stop %s, timed out %s (%d slot requests waiting)",
                     list(decision.start), list(decision.stop), list(decision.timed_out),
                     self.slots.pending)
        self._publish_demand()

    def _publish_demand(self) -> None:
        assert self.elastic is not None
        planner, limits = self.elastic, self.elastic.limits
        if planner.retry_at != self._retry_at[0]:  # the wall clock of it, taken once
            self._retry_at = (planner.retry_at,
                              time.time() + planner.retry_at - time.monotonic())
        retry_at = self._retry_at[1] if planner.retry_at > time.monotonic() else 0.0
        demand = p.TaskManagerDemand(
            self.fencing_token or "", tuple(planner.starting), tuple(planner.stopping),
            limits.min_taskmanagers, limits.max_taskmanagers, tuple(sorted(planner.owned)),
            planner.failed_starts, retry_at, planner.last_failure)
        if self._demand is not None and demand == dataclasses.replace(self._demand,
                                                                      taken_at=0.0):
            return
        self._demand = dataclasses.replace(demand, taken_at=time.time())
        self.rpc_service.publish(topics.TASKMANAGER_DEMAND, self._demand, retained=True)
        self._publish_snapshot()

    # -- observers ------------------------------------------------------------------------------

    @handler(p.RequestClusterOverview, fenced=False)
    def request_cluster_overview(self, _request: p.RequestClusterOverview) -> p.ClusterOverview:
        return self.overview()

    def overview(self) -> p.ClusterOverview:
        """Every TaskManager the registry holds, as one message holds them (the slot
        counts are of all registered ones, listed or not)."""
        infos = tuple(self._info(r) for r in self.registry.all())
        live = [info for info in infos if info.state is p.TaskManagerState.REGISTERED]
        return fitted_overview(p.ClusterOverview(
            cluster_id=self.cluster_id, taskmanagers=infos,
            slots_total=sum(i.slots_total for i in live),
            slots_free=sum(i.slots_free for i in live), jobmanager_pid=os.getpid(),
            taken_at=time.time(), fencing_token=self.fencing_token,
            leader_epoch=epoch_of(self.fencing_token), leader_host=socket.gethostname(),
            standbys=self.standbys, leader_cause=self.leader_cause, elastic=self._demand),
            self.framesize)

    def standbys_changed(self, standbys: tuple[str, ...]) -> None:
        """Main thread (posted by the JobManager's standby watch): the overview lists them."""
        if standbys != self.standbys:
            self.standbys = standbys
            self._publish_snapshot()

    def _info(self, registration: Registration) -> p.TaskManagerInfo:
        age = self.heartbeats.heartbeat_age(registration.resource_id, time.monotonic())
        return self.registry.info(registration, None if age is None else round(age, 3),
                                  self.slots.free_count(registration.resource_id))

    def _publish_snapshot(self) -> None:
        """Retained, so a late observer sees the present at once; every heartbeat round
        publishes it again so observers see the heartbeat ages move. Changes within
        ``SNAPSHOT_DELAY`` go out as one overview."""
        if not self._snapshot_due:
            self._snapshot_due = True
            self.schedule(SNAPSHOT_DELAY, self._publish_snapshot_now)

    def _publish_snapshot_now(self) -> None:
        self._snapshot_due = False
        self.rpc_service.publish(topics.CLUSTER_STATE, self.overview(), retained=True)
