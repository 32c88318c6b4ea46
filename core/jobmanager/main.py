"""``clusterdeck jobmanager``: the ResourceManager and the Dispatcher in one process."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from pathlib import Path

from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobmanager.dispatcher import Dispatcher
from clusterdeck.core.jobmanager.jobstore import JobStore
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
from clusterdeck.core.protocol.gateways import ResourceManagerGateway

log = logging.getLogger(__name__)
SERVICE_ID = topics.JOBMANAGER


def run_jobmanager(config: Config, broker_url: str | None = None) -> int:
    """Raises ClusterLockedError, before anything else happens, when another JobManager
    or supervisor of this cluster runs: a second JobManager would recover and run the
    same unfinished jobs again and take over the first one's MQTT client id."""
    setup_logging("jobmanager")
    cluster_dir = paths.cluster_dir(config["cluster.id"])
    with clusterlock.acquire(cluster_dir, config["cluster.id"], "jobmanager",
                             accept_handover=True) as lock:
        if lock.inherited:
            log.info("running under the cluster lock of our %s", lock.holder.describe())
        return _lead(config, broker_url, cluster_dir)


def _lead(config: Config, broker_url: str | None, cluster_dir: Path) -> int:
    service = connect_service(config, "jobmanager", SERVICE_ID,
                              broker_address(config, "jobmanager", broker_url))
    # A new token on every start: messages meant for an earlier leader are refused.
    token = uuid.uuid4().hex
    resource_manager = ResourceManager(config, token)
    dispatcher = Dispatcher(config, service.gateway(ResourceManagerGateway,
                                                    resource_manager.endpoint_id, token),
                            JobStore(cluster_dir / "jobs"), cluster_dir / "work", token)
    service.start_endpoint(resource_manager)
    service.start_endpoint(dispatcher)
    service.publish(topics.LEADER, p.LeaderInfo(
        resource_manager=resource_manager.endpoint_id, dispatcher=dispatcher.endpoint_id,
        fencing_token=token, protocol_version=p.PROTOCOL_VERSION, pid=os.getpid(),
        host=socket.gethostname(), started_at=time.time()), retained=True)
    log.info("JobManager of cluster %s is leading (pid %d)", config["cluster.id"], os.getpid())
    try:
        disconnected = wait_for_termination(service, config["broker.reconnect-timeout"])
    finally:
        service.close()
    return exitcodes.DISCONNECTED if disconnected else 0
