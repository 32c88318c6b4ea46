"""``clusterdeck taskmanager``: one TaskExecutor with its slots."""

from __future__ import annotations

import logging
import os
import signal
import socket

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.credentials import CredentialsError, hand_out_taskmanager, identity_of
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config, ConfigError
from clusterdeck.core.node import exitcodes
from clusterdeck.core.node.service import (
    broker_address,
    connect_service,
    setup_logging,
    wait_for_termination,
)
from clusterdeck.core.supervisor import RESTARTS_ENV
from clusterdeck.core.taskmanager.dataplane import start_data_plane
from clusterdeck.core.taskmanager.jobfolders import kept_at, stand_ins_of
from clusterdeck.core.taskmanager.taskexecutor import TaskExecutor

log = logging.getLogger(__name__)


def resource_id_for(config: Config, resource_id: str | None,
                    broker_url: str | BrokerAddress | None) -> str:
    """Who this TaskManager is. On a clusterdeck broker its id is its login (one of the
    pool's ``taskmanager-<n>``, broker/credentials.py): the one given, the one in the
    ``--broker`` URL's username, or, on the cluster's own machine, one handed out now."""
    if resource_id:
        return resource_id
    if broker_url is not None or config["broker.kind"] == "external":
        address = broker_url if isinstance(broker_url, BrokerAddress) else (
            BrokerAddress.parse(broker_url or config["broker.url"]))
        named = identity_of(config["cluster.id"], address.username or "")
        return named or f"{socket.gethostname()}-{os.getpid()}"
    cluster_id = config["cluster.id"]
    try:
        return hand_out_taskmanager(paths.cluster_dir(cluster_id), cluster_id)
    except (CredentialsError, OSError) as error:
        raise ConfigError(f"no TaskManager login for this TaskManager: {error}") from None


def run_taskmanager(config: Config, resource_id: str | None = None,
                    broker_url: str | BrokerAddress | None = None) -> int:
    setup_logging("taskmanager")
    resource_id = resource_id_for(config, resource_id, broker_url)
    service = connect_service(config, "taskmanager", resource_id,
                              broker_address(config, "taskmanager", broker_url, resource_id))
    refusal: list[str] = []

    def refused(reason: str) -> None:
        refusal.append(reason)
        os.kill(os.getpid(), signal.SIGTERM)

    scratch = paths.cluster_dir(config["cluster.id"]) / "taskmanagers" / resource_id
    stand_ins = stand_ins_of(config["cluster.id"])
    data_plane = start_data_plane(config, service.address, scratch,
                                  locate=lambda work_dir: kept_at(work_dir, stand_ins),
                                  owner=resource_id)
    executor = TaskExecutor(config, resource_id, service.instance_id, on_refused=refused,
                            data_plane=data_plane)
    service.start_endpoint(executor)
    log.info("TaskManager %s started with %d slots; data service at %s, stream channels at "
             "%s", resource_id, config["taskmanager.slots"], data_plane.address.url,
             data_plane.stream_address)
    try:
        disconnected = wait_for_termination(service, config["broker.reconnect-timeout"],
                                            keep_reconnecting=RESTARTS_ENV not in os.environ)
    finally:
        service.close()
        data_plane.stop()
    if disconnected:
        return exitcodes.DISCONNECTED
    if refusal:
        log.error("the JobManager refused this TaskManager: %s", refusal[0])
        return exitcodes.REFUSED
    return 0
