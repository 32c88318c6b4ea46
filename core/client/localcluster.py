"""A local cluster: the broker, its flight recorder, its JobManagers (one leads, the
others stand by: docs/ha.md), N TaskManagers, and with ``ha.mode = zookeeper`` and no
quorum a ZooKeeper server of its own, under one Supervisor.

Used by ``clusterdeck up`` and ``run`` and by the desktop app. Every child is started with
this interpreter and the effective configuration written to the cluster's run directory, so
a restarted child comes back exactly as it was. It holds the cluster's lock
(``core/node/clusterlock.py``) from its construction until ``stop``: one cluster id runs
one cluster at a time. With ``elastic.provider`` set it starts no TaskManagers itself: its
resource provider starts and stops them as the ResourceManager asks (docs/elastic.md).
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
from pathlib import Path

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.connection import write_connection
from clusterdeck.broker.credentials import (
    CredentialsError,
    ensure_private_dir,
    load_or_create,
    taskmanager_index,
    taskmanager_name,
)
from clusterdeck.broker.exported import ExportedCredentials
from clusterdeck.broker.server import (
    choose_port,
    local_address,
    prepare_tls,
    resolve_kind,
    wait_ready,
)
from clusterdeck.core.client.jobclient import ClusterClient
from clusterdeck.core.client.provider import TaskManagerProvider
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config, ConfigError
from clusterdeck.core.ha import zkserver
from clusterdeck.core.node import clusterlock
from clusterdeck.core.node.frozen import cli_argv
from clusterdeck.core.node.service import run_dir
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.supervisor import ProcessSpec, Supervisor

log = logging.getLogger(__name__)




def _check_command(template: str) -> None:
    """Refuse an ``elastic.command`` that names no command or placeholders it does not
    have here, rather than have every TaskManager's start fail on it."""
    if not template.strip():
        raise ConfigError("elastic.provider command needs elastic.command")
    try:
        template.format(name="taskmanager-1", index=1, cluster="c")
    except (KeyError, IndexError, ValueError) as error:
        raise ConfigError(f"elastic.command {template!r}: only {{name}}, {{index}} and "
                          f"{{cluster}} are filled in (write {{{{ and }}}} for braces): "
                          f"{error!r}") from None


class LocalCluster:
    def __init__(self, config: Config) -> None:
        self.cluster_id: str = config["cluster.id"]
        self.cluster_dir = paths.cluster_dir(self.cluster_id)
        if config["ha.mode"] == "none" and config["jobmanager.count"] > 1:
            raise ConfigError("more than one JobManager needs ha.mode local or zookeeper "
                              "(--ha): without an election they would run the same jobs "
                              "twice")
        # First of all: a second start of a running cluster fails here (ClusterLockedError)
        # and leaves its port, broker.json, credentials and run config alone.
        self.lock = clusterlock.acquire(self.cluster_dir, self.cluster_id, "supervisor")
        try:
            self.broker_kind = resolve_kind(config["broker.kind"])
            if self.broker_kind != "external":
                config = config.with_overrides(
                    {"broker.port": choose_port(config, self.cluster_dir)})
                # Made here, before the broker runs, so the first client trusts its CA.
                prepare_tls(config, ensure_private_dir(self.cluster_dir))
            self.zookeeper_port = 0
            if config["ha.mode"] == "zookeeper" and not config["ha.zookeeper.quorum"]:
                self.zookeeper_port = zkserver.free_port()
                config = config.with_overrides(
                    {"ha.zookeeper.quorum": f"127.0.0.1:{self.zookeeper_port}"})
            self.config = config
            self.provider: TaskManagerProvider | None = None
            if config["elastic.provider"] != "none" and self.broker_kind == "external":
                raise ConfigError("elastic.provider needs the cluster's own broker: the "
                                  "TaskManagers it starts log in with the cluster's logins")
            if config["elastic.provider"] == "command":
                _check_command(config["elastic.command"])
            if config["elastic.min-taskmanagers"] > config["elastic.max-taskmanagers"]:
                raise ConfigError("elastic.min-taskmanagers exceeds "
                                  "elastic.max-taskmanagers")
            self.supervisor = Supervisor(config, paths.cluster_log_dir(self.cluster_id))
            self.config_path = self._write_config()
        except BaseException:
            self.lock.release()
            raise

    def _write_config(self) -> Path:
        directory = ensure_private_dir(run_dir(self.cluster_id))
        path = directory / "config.toml"
        path.write_text(self.config.to_toml(), encoding="utf-8")
        return path

    def _spec(self, name: str, role: str, *command: str) -> ProcessSpec:
        # Unbuffered, so a child's log lines reach its log file as they are written; the
        # home pinned, so a restarted child finds the same cluster as the first one did.
        env = {"PYTHONUNBUFFERED": "1"}
        if paths.HOME_ENV in os.environ:
            env[paths.HOME_ENV] = os.environ[paths.HOME_ENV]
        if role == "jobmanager" and self.config["ha.mode"] == "none":
            # The JobManager takes the cluster's lock too; ours, handed on, lets it (and
            # every restart of it) run while we hold it. With high availability the
            # JobManagers compete in their election instead (core/ha).
            env.update(self.lock.handover_env())
        return ProcessSpec(name, role, self._argv(*command), env=env)

    def _argv(self, *command: str) -> tuple[str, ...]:
        return tuple(cli_argv(*command, "--config", str(self.config_path)))

    def start(self, ready_timeout: float = 30.0) -> None:
        """Start the broker and wait until it accepts logins, then the JobManager and the
        TaskManagers (which register on their own)."""
        if self.broker_kind == "external":
            address = BrokerAddress.parse(self.config["broker.url"])
            write_connection(self.cluster_dir, "external", address.without_credentials())
        else:
            self.supervisor.add(self._spec("broker", "broker", "broker"))
            self.supervisor.start_process("broker")
            address = self.broker_address()
            wait_ready(address, ready_timeout)
        if self.config["recorder.enabled"]:
            # Before the JobManager, so that the recording has the cluster from its start.
            self.supervisor.add(self._spec("recorder", "recorder", "recorder"))
            self.supervisor.start_process("recorder")
        if self.zookeeper_port:
            self._start_zookeeper(ready_timeout)
        for name in self.jobmanager_names():
            self.supervisor.add(self._spec(name, "jobmanager", "jobmanager"))
            self.supervisor.start_process(name)
        if self.config["elastic.provider"] != "none":
            self.provider = TaskManagerProvider(
                self.config, self.supervisor, self.broker_address(), self._demanded_spec,
                lambda name: self.broker_address("taskmanager", name))
            self.provider.start()
            return
        for index in range(1, self.config["taskmanager.count"] + 1):
            self.add_taskmanager(index)

    @property
    def initial_taskmanagers(self) -> int:
        """TaskManagers to wait for after ``start``: with a provider, its minimum."""
        if self.config["elastic.provider"] != "none":
            return self.config["elastic.min-taskmanagers"]
        return self.config["taskmanager.count"]

    def _demanded_spec(self, name: str) -> ProcessSpec:
        """Called on the provider's thread: how TaskManager ``name`` runs, on this machine
        or through ``elastic.command``, which gets its credentials on standard input."""
        self._check_login(name)
        if self.config["elastic.provider"] == "local":
            return self._spec(name, "taskmanager", "taskmanager", "--id", name)
        directory = ensure_private_dir(run_dir(self.cluster_id) / "credentials")
        credentials = directory / f"{name}.json"
        address = self.broker_address("taskmanager", name)
        credentials.write_text(ExportedCredentials(self.cluster_id, "taskmanager", address,
                                                   name).to_json(), encoding="utf-8")
        credentials.chmod(0o600)
        command = self.config["elastic.command"].format(
            name=shlex.quote(name), index=taskmanager_index(name),
            cluster=shlex.quote(self.cluster_id))
        return ProcessSpec(name, "taskmanager", (
            "/bin/sh", "-c", f"{{ {command}\n}} < {shlex.quote(str(credentials))}"),
            env=self._spec(name, "taskmanager", "taskmanager").env)

    def jobmanager_names(self) -> list[str]:
        """``jobmanager``, then ``jobmanager-2`` … for the standbys started with it."""
        count = self.config["jobmanager.count"]
        return ["jobmanager", *(f"jobmanager-{n}" for n in range(2, count + 1))]

    def _start_zookeeper(self, ready_timeout: float) -> None:
        """The cluster's own ZooKeeper (core/ha/zkserver.py), its files in the cluster's
        folder; up before the JobManagers, which give up when they cannot reach it."""
        directory = ensure_private_dir(self.cluster_dir / "zookeeper")
        argv = zkserver.server_argv(zkserver.write_config(directory, self.zookeeper_port))
        self.supervisor.add(ProcessSpec("zookeeper", "zookeeper", argv, cwd=str(directory)))
        self.supervisor.start_process("zookeeper")
        zkserver.wait_serving(self.zookeeper_port, ready_timeout)

    def add_taskmanager(self, index: int) -> str:
        """Start TaskManager ``index``, whose login is the pool's ``taskmanager-<index>``
        (broker/credentials.py); one handed to another machine is not taken twice."""
        name = taskmanager_name(index)
        if self.broker_kind != "external":
            self._check_login(name)
        self.supervisor.add(self._spec(name, "taskmanager", "taskmanager", "--id", name))
        self.supervisor.start_process(name)
        return name

    def _check_login(self, name: str) -> None:
        credentials = load_or_create(self.cluster_dir, self.cluster_id)
        if taskmanager_index(name) is None or name in credentials.exported:
            raise CredentialsError(
                f"no login left for a local {name}: the cluster has "
                f"{len(credentials.taskmanagers)} TaskManager logins and "
                f"{len(credentials.exported)} of them were handed out")

    def broker_address(self, role: str = "client", name: str | None = None) -> BrokerAddress:
        """Known before the broker runs: its port is fixed here and the credentials are
        created here, so nobody waits for the broker's connection file. A TaskManager's
        login is its own: ``name``."""
        if self.broker_kind == "external":
            return BrokerAddress.parse(self.config["broker.url"])
        username, password = load_or_create(self.cluster_dir, self.cluster_id).for_role(
            role, name)
        return local_address(self.config, self.cluster_dir,
                             self.config["broker.port"]).with_credentials(username, password)

    def wait_for_taskmanagers(self, count: int, timeout: float) -> p.ClusterOverview:
        """Wait on the retained cluster snapshot until ``count`` TaskManagers are registered."""
        latest: list[p.ClusterOverview] = []
        ready = threading.Event()

        def on_state(_topic: str, overview: object) -> None:
            if isinstance(overview, p.ClusterOverview):
                latest[:] = [overview]
                live = [t for t in overview.taskmanagers
                        if t.state is p.TaskManagerState.REGISTERED]
                if len(live) >= count:
                    ready.set()

        with ClusterClient(self.config, connect_timeout=timeout) as client:
            client.service.subscribe(topics.CLUSTER_STATE, on_state)
            if not ready.wait(timeout):
                raise TimeoutError(f"not all {count} TaskManagers registered within "
                                   f"{timeout:g} s; see the logs in "
                                   f"{paths.cluster_log_dir(self.cluster_id)}")
        return latest[0]

    def stop(self) -> None:
        """Stop every process, then let the cluster's lock go: only once its JobManager is
        down may another one start."""
        try:
            if self.provider is not None:
                self.provider.close()
            self.supervisor.stop()
        finally:
            self.lock.release()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
