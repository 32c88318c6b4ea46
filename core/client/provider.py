"""The resource provider: carries out the ResourceManager's ``TaskManagerDemand`` with the
supervisor of this machine (``elastic.provider`` local or command, docs/elastic.md).

The ResourceManager decides which TaskManagers run; this only starts and stops them,
and tells it of a start that failed, with the end of the TaskManager's log. That report
goes with the failed TaskManager's own login: the broker lets it write only as that
TaskManager, so the provider needs no login beyond the client's (reading the retained
demand) and the TaskManagers' it starts anyway.

Threads: the demand arrives on paho's network thread, process changes on the supervisor
thread; both only post to the inbox. The provider's own thread (``clusterdeck-provider``)
drains it, owns every field below, and alone calls the supervisor, whose start and stop
wait for the processes.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node.service import connect_service
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.elastic import START_FAILURE_CHARS
from clusterdeck.core.protocol.fencing import EpochFence
from clusterdeck.core.protocol.gateways import ResourceManagerGateway
from clusterdeck.core.rpc.mqtt import MqttRpcService
from clusterdeck.core.supervisor import ProcessInfo, ProcessSpec, ProcessStatus, Supervisor

log = logging.getLogger(__name__)

LOG_LINES = 20  # of a failed TaskManager's log, in its cause
REPORT_TIMEOUT = 5.0  # seconds to connect with the failed TaskManager's login


@dataclass(frozen=True)
class _Exited:
    """Posted by the supervisor listener: a process this provider started went down."""

    info: ProcessInfo


def report_start_failure(config: Config, address: BrokerAddress,
                         demand: p.TaskManagerDemand, failure: p.TaskManagerStartFailed
                         ) -> None:
    """Tell the ResourceManager, with the failed TaskManager's login (``address``)."""
    service = connect_service(config, "taskmanager", failure.resource_id, address,
                              connect_timeout=REPORT_TIMEOUT, with_presence=False)
    try:
        service.gateway(ResourceManagerGateway, "resourcemanager",
                        demand.fencing_token).taskmanager_start_failed(failure)
    finally:
        service.close()


Report = Callable[[Config, BrokerAddress, p.TaskManagerDemand, p.TaskManagerStartFailed],
                  None]


class TaskManagerProvider:
    """``spec_for(name)`` builds the process spec of TaskManager ``name`` (raising
    ValueError when it cannot run here, e.g. its login was handed out); ``address_for``
    gives the broker address with that TaskManager's login; ``report`` sends a failed
    start."""

    def __init__(self, config: Config, supervisor: Supervisor, client_address: BrokerAddress,
                 spec_for: Callable[[str], ProcessSpec],
                 address_for: Callable[[str], BrokerAddress],
                 report: Report = report_start_failure) -> None:
        self.config = config
        self.supervisor = supervisor
        self._client_address = client_address
        self._spec_for = spec_for
        self._address_for = address_for
        self._report = report
        self._inbox: queue.SimpleQueue[p.TaskManagerDemand | _Exited | None] = \
            queue.SimpleQueue()
        self._fence = EpochFence("resource provider")
        self._service: MqttRpcService | None = None
        self._thread = threading.Thread(target=self._run, name="clusterdeck-provider",
                                        daemon=True)
        # Owned by the provider's thread:
        self._demand: p.TaskManagerDemand | None = None
        self._owned: set[str] = set()     # processes this provider added
        self._stopping: set[str] = set()  # asked to stop: their exit is no failure
        self._failed: dict[str, int] = {}  # name -> the demand's failed_starts it failed in

    def start(self) -> None:
        """Connect with the client login (blocking) and follow the leader's demand."""
        self.supervisor.add_listener(self._on_process)
        self._thread.start()
        self._service = connect_service(
            self.config, "client", f"client-provider-{uuid.uuid4().hex[:12]}",
            self._client_address,
            with_presence=False, identity="client")
        self._service.subscribe(topics.TASKMANAGER_DEMAND, self._on_demand)

    def close(self) -> None:
        self.supervisor.remove_listener(self._on_process)
        if self._service is not None:
            self._service.close()
        self._inbox.put(None)
        self._thread.join(10.0)

    # -- other threads: decode and post ------------------------------------------------------

    def _on_demand(self, _topic: str, demand: Any) -> None:
        """Paho's thread. A deposed leader's demand (a lower epoch) is refused."""
        if isinstance(demand, p.TaskManagerDemand) and not self._fence.admit(
                demand.fencing_token, "a TaskManager demand"):
            self._inbox.put(demand)

    def _on_process(self, info: ProcessInfo) -> None:
        """The supervisor thread. A process added but never spawned is STOPPED too."""
        if info.status is ProcessStatus.FAILED or (
                info.status is ProcessStatus.STOPPED and info.started_at is not None):
            self._inbox.put(_Exited(info))

    # -- the provider's thread ---------------------------------------------------------------

    def _run(self) -> None:
        """Until ``close`` posts None (tests post it and run this on their own thread)."""
        while (event := self._inbox.get()) is not None:
            try:
                if isinstance(event, p.TaskManagerDemand):
                    self._demand = event
                    self._reconcile()
                else:
                    self._exited(event.info)
            except Exception:
                log.exception("resource provider: unexpected error; carrying on")

    def _reconcile(self) -> None:
        demand = self._demand
        assert demand is not None
        self._failed = {n: c for n, c in self._failed.items() if n in demand.starts}
        for name in demand.stops:
            if name in self._owned and name not in self._stopping:
                self._stopping.add(name)
                log.info("stopping %s: the ResourceManager asked", name)
                self.supervisor.stop_process(name)
        for name in demand.starts:
            if self._failed.get(name) == demand.failed_starts:
                continue  # failed under this very decision; the next one may retry it
            self._start(name, demand)

    def _start(self, name: str, demand: p.TaskManagerDemand) -> None:
        known = {info.name: info for info in self.supervisor.processes()}
        info = known.get(name)
        if info is not None and info.pid is not None:
            return  # up, or coming up
        if info is not None and name not in self._owned:
            self._fail(name, demand, f"a process named {name} that was not started on "
                       "demand is supervised here already", None)
            return
        try:
            if info is None:
                # The ResourceManager decides whether a TaskManager comes back, not the
                # supervisor's restart policy.
                self.supervisor.add(replace(self._spec_for(name), restart=False))
                self._owned.add(name)
            self._stopping.discard(name)
            log.info("starting %s: the ResourceManager asked", name)
            self.supervisor.start_process(name)
        except (ValueError, OSError) as error:
            self._fail(name, demand, f"cannot start: {error}", None)

    def _exited(self, info: ProcessInfo) -> None:
        if info.name not in self._owned:
            return
        current = next((i for i in self.supervisor.processes() if i.name == info.name), None)
        if current is not None and current.pid is not None:
            # The exit of an instance stopped before this one started: the ResourceManager
            # reuses a name it stopped once that TaskManager said goodbye, which it does
            # just before its process ends.
            return
        if info.name in self._stopping:
            self._stopping.discard(info.name)
            return
        demand = self._demand
        if demand is None or info.name not in demand.starts:
            return  # it had registered: the ResourceManager sees it lost
        self._fail(info.name, demand, f"exited with code {info.last_exit_code} before it "
                   f"registered; its log ends:\n{_log_tail(info.log_path)}",
                   info.last_exit_code)

    def _fail(self, name: str, demand: p.TaskManagerDemand, cause: str,
              exit_code: int | None) -> None:
        """Tell the ResourceManager; it will not be started again under this demand."""
        self._failed[name] = demand.failed_starts
        log.warning("TaskManager %s failed to start: %s", name, cause)
        try:
            self._report(self.config, self._address_for(name), demand,
                         p.TaskManagerStartFailed(name, cause[-START_FAILURE_CHARS:],
                                                  exit_code))
        except Exception as error:
            log.error("could not report the failed start of %s: %s (the ResourceManager "
                      "counts it failed after elastic.start-timeout)", name, error)


def _log_tail(path: Path) -> str:
    """The last lines of a process's log, bounded; what a failed start left behind."""
    try:
        with path.open("rb") as file:
            file.seek(0, 2)
            file.seek(max(0, file.tell() - 16 * 1024))
            lines = file.read().decode("utf-8", "replace").splitlines()
    except OSError as error:
        return f"(its log {path.name} cannot be read: {error})"
    return "\n".join(lines[-LOG_LINES:])[-START_FAILURE_CHARS:]
