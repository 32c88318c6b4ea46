"""``clusterdeck jobmanager``: the ResourceManager and the Dispatcher in one process.

With ``ha.mode`` local or zookeeper the process first stands by until the election
(core/ha) makes it the leader, and only then connects: standbys share the leader's MQTT
identity and must not knock it off the broker. A leader that loses its leadership stops
its endpoints at once and exits with LEADERSHIP_LOST; its supervisor starts it again,
as a standby (docs/ha.md).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.core import ha
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobmanager.dispatcher import Dispatcher
from clusterdeck.core.jobmanager.jobstore import JobStore
from clusterdeck.core.jobmanager.leadership import LeaderRecordWatch, watch_standbys
from clusterdeck.core.jobmanager.resourcemanager import ResourceManager
from clusterdeck.core.node import clusterlock, exitcodes
from clusterdeck.core.node.service import (
    broker_address,
    connect_service,
    setup_logging,
    wait_for_termination,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.fencing import fencing_token
from clusterdeck.core.protocol.gateways import ResourceManagerGateway

log = logging.getLogger(__name__)
SERVICE_ID = topics.JOBMANAGER


def run_jobmanager(config: Config, broker_url: str | BrokerAddress | None = None) -> int:
    """Raises ClusterLockedError, before anything else happens, when ``ha.mode`` is none
    and another JobManager or supervisor of this cluster runs: a second JobManager would
    recover and run the same unfinished jobs again and take over the first one's MQTT
    client id. With high availability the election keeps them apart instead."""
    setup_logging("jobmanager")
    cluster_dir = paths.cluster_dir(config["cluster.id"])
    if config["ha.mode"] == "none":
        with clusterlock.acquire(cluster_dir, config["cluster.id"], "jobmanager",
                                 accept_handover=True) as lock:
            if lock.inherited:
                log.info("running under the cluster lock of our %s", lock.holder.describe())
            return _elected(config, broker_url, cluster_dir, ha.election_for(config,
                                                                             cluster_dir))
    # A standby told to stop while it waits leaves through the election's close.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    return _elected(config, broker_url, cluster_dir, ha.election_for(config, cluster_dir))


def _elected(config: Config, broker_url: str | BrokerAddress | None, cluster_dir: Path,
             election: ha.LeaderElection) -> int:
    stop = threading.Event()
    try:
        if election.mode != "none":
            log.info("standing by: waiting to lead cluster %s (ha.mode %s)",
                     config["cluster.id"], election.mode)
        standing_since = time.monotonic()
        leadership = election.run_for_leadership(stop)
        waited = time.monotonic() - standing_since
        log.info("elected leader at epoch %d after %.3f s", leadership.epoch, waited)
        cause = f"won the {election.mode} election after standing by {waited:.1f} s" \
            if election.mode != "none" else "the cluster's only JobManager (ha.mode none)"
        return _lead(config, broker_url, ha.storage_dir(config, cluster_dir), election,
                     leadership, cause)
    finally:
        stop.set()
        election.close()


def _lead(config: Config, broker_url: str | BrokerAddress | None, storage_dir: Path,
          election: ha.LeaderElection, leadership: ha.Leadership, cause: str) -> int:
    """Lead until the leadership or the broker is lost; ``cause``: how it came to lead,
    for the overview and the LeadershipChanged events."""
    service = connect_service(config, "jobmanager", SERVICE_ID,
                              broker_address(config, "jobmanager", broker_url))
    # A new token on every start, carrying the epoch: messages meant for an earlier
    # leader are refused, and receivers refuse this one's once a newer leader is known.
    token = fencing_token(leadership.epoch)
    resource_manager = ResourceManager(config, token, leader_cause=cause)
    dispatcher = Dispatcher(config, service.gateway(ResourceManagerGateway,
                                                    resource_manager.endpoint_id, token),
                            JobStore(storage_dir / "jobs"), storage_dir / "work", token)
    record = p.LeaderInfo(
        resource_manager=resource_manager.endpoint_id, dispatcher=dispatcher.endpoint_id,
        fencing_token=token, protocol_version=p.PROTOCOL_VERSION, pid=os.getpid(),
        host=socket.gethostname(), started_at=time.time(), epoch=leadership.epoch,
        ha_mode=election.mode)
    LeaderRecordWatch(service, record, leadership)
    service.start_endpoint(resource_manager)
    service.start_endpoint(dispatcher)
    service.publish(topics.LEADER, record, retained=True)
    service.publish(topics.CLUSTER_EVENTS, _change(record, True, cause))
    log.info("JobManager of cluster %s is leading (pid %d, epoch %d)", config["cluster.id"],
             os.getpid(), leadership.epoch)
    if election.mode != "none":
        watch_standbys(election, resource_manager, leadership.lost)
    try:
        disconnected = wait_for_termination(service, config["broker.reconnect-timeout"],
                                            stop=leadership.lost)
        if leadership.cause:  # told while the broker may still be reachable
            service.publish(topics.CLUSTER_EVENTS, _change(record, False, leadership.cause))
    finally:
        service.close()
    if leadership.cause:
        log.error("leadership lost (%s): endpoints stopped; exiting to stand by again",
                  leadership.cause)
        return exitcodes.LEADERSHIP_LOST
    return exitcodes.DISCONNECTED if disconnected else 0


def _change(record: p.LeaderInfo, leading: bool, cause: str) -> p.LeadershipChanged:
    return p.LeadershipChanged(record.epoch, record.pid, record.host, record.ha_mode, leading,
                               cause[:500], time.time())
