"""What a leading JobManager watches besides its work: the retained leader record and
its standbys.

The record on ``state/leader`` is only ever replaced by a higher epoch. A leader that sees
one of a higher epoch than its own is stale (it was stopped or cut off while another took
over): it ends its Leadership, and main.py stops its endpoints and exits to stand by. One
of a lower epoch is a stale leader's, put back by its reconnect: the leader publishes its
own again, so the record a late TaskManager or client finds is the newest.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from clusterdeck.core.ha import LeaderElection, Leadership
from clusterdeck.core.jobmanager.resourcemanager import ResourceManager
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.rpc.mqtt import MqttRpcService

log = logging.getLogger(__name__)

STANDBY_REFRESH = 2.0  # seconds between two looks at the standbys, for the overview


class LeaderRecordWatch:
    """Follows ``state/leader`` on paho's network thread; touches only the (thread-safe)
    Leadership and the service's publish."""

    def __init__(self, service: MqttRpcService, record: p.LeaderInfo,
                 leadership: Leadership) -> None:
        self._service = service
        self._record = record
        self._leadership = leadership
        service.subscribe(topics.LEADER, self._on_record)

    def _on_record(self, _topic: str, record: Any) -> None:
        if not isinstance(record, p.LeaderInfo):
            return
        if record.epoch > self._record.epoch:
            log.error("the JobManager pid %d on %s leads at epoch %d, newer than ours (%d): "
                      "this one is stale and stops", record.pid, record.host, record.epoch,
                      self._record.epoch)
            self._leadership.lose(f"a newer leader (epoch {record.epoch}, pid {record.pid} "
                                  f"on {record.host}) took over")
        elif record.epoch < self._record.epoch:
            log.info("the leader record of epoch %d (pid %d on %s: the previous leader's, "
                     "or a stale one's put back) is older than ours; publishing ours "
                     "(epoch %d) over it", record.epoch, record.pid, record.host,
                     self._record.epoch)
            self._service.publish(topics.LEADER, self._record, retained=True)


def watch_standbys(election: LeaderElection, resource_manager: ResourceManager,
                   stop: threading.Event) -> threading.Thread:
    """A daemon thread that asks the election for its standbys every few seconds (a
    ZooKeeper read must not block an endpoint) and posts them to the ResourceManager."""
    def run() -> None:
        while True:
            resource_manager.run_async(resource_manager.standbys_changed, election.standbys())
            if stop.wait(STANDBY_REFRESH):
                return
    thread = threading.Thread(target=run, name="standby-watch", daemon=True)
    thread.start()
    return thread
