"""``clusterdeck taskmanager``: one TaskExecutor with its slots."""

from __future__ import annotations

import logging
import os
import signal
import socket

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node import exitcodes
from clusterdeck.core.node.service import (
    broker_address,
    connect_service,
    setup_logging,
    wait_for_termination,
)
from clusterdeck.core.taskmanager.taskexecutor import TaskExecutor

log = logging.getLogger(__name__)


def default_resource_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def run_taskmanager(config: Config, resource_id: str | None = None,
                    broker_url: str | BrokerAddress | None = None) -> int:
    setup_logging("taskmanager")
    resource_id = resource_id or default_resource_id()
    service = connect_service(config, "taskmanager", resource_id,
                              broker_address(config, "taskmanager", broker_url))
    refusal: list[str] = []

    def refused(reason: str) -> None:
        refusal.append(reason)
        os.kill(os.getpid(), signal.SIGTERM)

    executor = TaskExecutor(config, resource_id, service.instance_id, on_refused=refused)
    service.start_endpoint(executor)
    log.info("TaskManager %s started with %d slots", resource_id, config["taskmanager.slots"])
    try:
        disconnected = wait_for_termination(service, config["broker.reconnect-timeout"])
    finally:
        service.close()
    if disconnected:
        return exitcodes.DISCONNECTED
    if refusal:
        log.error("the JobManager refused this TaskManager: %s", refusal[0])
        return exitcodes.REFUSED
    return 0
