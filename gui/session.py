"""The GUI's hold on one cluster: a local one it runs, or a running one it attached to.

Starting, stopping and restarting block for seconds (the broker must accept logins,
children get a grace period to exit), so they run on a worker thread; their outcome comes
back to the GUI thread through the bridge (``call_on_gui_thread``) and is announced with
``state_changed``. Lifecycle work runs on one worker, in order (a Stop clicked during a
Start waits for the Start); commands to single processes run on a second worker, so
killing a TaskManager never waits behind a slow restart of another one.

A local cluster has our supervisor: processes can be restarted and killed through it.
An attached cluster (started by ``clusterdeck up`` or by another window) is only watched
through a JobClient; its processes can still be killed by pid when they run on this
host, to watch failover happen.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.connection import NoBrokerError
from clusterdeck.broker.exported import read
from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.client.localcluster import LocalCluster, taskmanager_name
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config, load
from clusterdeck.core.node.clusterlock import ClusterLockedError
from clusterdeck.core.node.service import run_dir
from clusterdeck.core.rpc import RpcError
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.models.sessionstate import SessionMode, SessionState

log = logging.getLogger(__name__)

_CONNECT_TIMEOUT = 30.0


class ClusterSession(QObject):
    """Owns the LocalCluster (if any) and the JobClient; lives on the GUI thread."""

    state_changed = Signal(object)
    """The new ``SessionState``."""
    notice = Signal(str)
    """A message for the user: something asked for could not be done."""

    def __init__(self, bridge: ClusterBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.state = SessionState()
        self.cluster: LocalCluster | None = None
        self.config: Config | None = None
        self._lifecycle = ThreadPoolExecutor(1, thread_name_prefix="clusterdeck-gui-lifecycle")
        self._commands = ThreadPoolExecutor(1, thread_name_prefix="clusterdeck-gui-commands")

    # -- lifecycle (GUI thread) ---------------------------------------------------------------

    def start(self, config: Config) -> None:
        """Start a local cluster from ``config`` and follow it; attach to it when it runs
        already (its lock is held)."""
        if self.state.active:
            self.notice.emit(f"cluster {self.state.cluster_id} is {self.state.mode}: stop it "
                             "first")
            return
        self.bridge.reset()
        try:
            cluster = LocalCluster(config)
        except ClusterLockedError as error:
            # Somebody runs this cluster already (`clusterdeck up`, another window): watch
            # it instead of starting a second one, with the configuration it runs with.
            self.notice.emit(f"{error}: attaching to it instead")
            with contextlib.suppress(ValueError):  # its run config unreadable: keep ours
                config = attach_config(config["cluster.id"])
            self.attach(config)
            return
        except (ValueError, OSError) as error:
            self._set(SessionState(error=f"cannot start cluster {config['cluster.id']}: "
                                   f"{error}"))
            return
        self._follow(cluster, owned=True)
        self._background(self._lifecycle, cluster.start, self._connect_local,
                         self._start_failed)

    def adopt(self, cluster: LocalCluster, owned: bool = True) -> None:
        """Follow a LocalCluster started elsewhere in this process (a test, the screenshot
        script). ``owned``: closing the window asks whether to stop it."""
        self.bridge.reset()
        self._follow(cluster, owned)
        self._connect_local(None)

    def attach(self, config: Config, broker: BrokerAddress | None = None,
               role: str = "client") -> None:
        """Watch a cluster somebody else runs, through a client only: of this machine's
        cluster folder, or, with ``broker``, of a credentials file's cluster
        (``credentials_attach``)."""
        if self.state.active:
            self.notice.emit("stop or detach the current cluster first")
            return
        self.bridge.reset()
        self.config = config
        self._set(SessionState(SessionMode.ATTACHING, config["cluster.id"],
                               config["broker.kind"]))
        self._background(self._lifecycle, lambda: _client(config, 10.0, broker, role),
                         self._attached, self._attach_failed)

    def stop(self, then: Callable[[], None] | None = None, error: str = "") -> None:
        """Stop the local cluster (every process), or detach from an attached one;
        ``error`` is kept in the final state to say why."""
        if not self.state.active or self.state.mode is SessionMode.STOPPING:
            return
        client = self.bridge.disconnect_client()
        cluster, self.cluster = self.cluster, None
        self._set(replace(self.state, mode=SessionMode.STOPPING, error=""))

        def work() -> None:
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.stop()

        def done(_: Any) -> None:
            self.bridge.reset()
            self._set(SessionState(error=error))
            if then is not None:
                then()

        self._background(self._lifecycle, work, done, done)

    def restart(self) -> None:
        """Stop the local cluster and start it again from the same configuration."""
        config = self.config
        if config is None or not self.state.supervised:
            self.notice.emit("only a cluster started here can be restarted")
            return
        self.stop(then=lambda: self.start(config))

    def shutdown(self) -> None:
        """Blocking: stop what we own and leave. For the application's exit only."""
        client = self.bridge.disconnect_client()
        self.bridge.close()
        if client is not None:
            client.close()
        if self.cluster is not None and self.state.owned:
            self.cluster.stop()
        self.cluster = None
        self._lifecycle.shutdown(wait=False, cancel_futures=True)
        self._commands.shutdown(wait=False, cancel_futures=True)
        self._set(SessionState())

    # -- single processes (GUI thread) --------------------------------------------------------

    def restart_process(self, name: str) -> None:
        cluster = self.cluster
        if cluster is None:
            self.notice.emit(f"{name} is not supervised here: it cannot be restarted")
            return
        self._background(self._commands, lambda: cluster.supervisor.restart(name), None,
                         lambda error: self._report(f"restart of {name} failed: {error}"))

    def kill_process(self, name: str, pid: int | None, host: str = "",
                     sig: int = signal.SIGKILL) -> None:
        """Fault injection: through the supervisor when it is ours (the exit is handled like
        any crash), else by pid when the process runs on this host."""
        cluster = self.cluster
        if cluster is not None and name in {p.name for p in cluster.supervisor.processes()}:
            self._background(self._commands, lambda: cluster.supervisor.kill(name, sig), None,
                             lambda error: self._report(f"kill of {name} failed: {error}"))
        elif pid and host in ("", socket.gethostname()):
            try:
                os.kill(pid, sig)
            except OSError as error:
                self.notice.emit(f"kill of {name} (pid {pid}) failed: {error}")
        else:
            self.notice.emit(f"{name} runs on {host or 'another host'}: it cannot be killed "
                             "from here")

    def add_taskmanager(self) -> None:
        cluster = self.cluster
        if cluster is None or self.state.mode is not SessionMode.RUNNING:
            self.notice.emit("TaskManagers can be added to a running local cluster only")
            return
        names = {p.name for p in cluster.supervisor.processes()}
        index = next(i for i in range(1, len(names) + 2) if taskmanager_name(i) not in names)
        self._background(self._commands, lambda: cluster.add_taskmanager(index), None,
                         lambda error: self._report(f"cannot add a TaskManager: {error}"))

    # -- GUI-thread continuations -------------------------------------------------------------

    def _follow(self, cluster: LocalCluster, owned: bool) -> None:
        self.cluster = cluster
        self.config = cluster.config
        self.bridge.connect_supervisor(cluster.supervisor)
        self._set(SessionState(SessionMode.STARTING, cluster.cluster_id, cluster.broker_kind,
                               supervised=True, owned=owned))

    def _connect_local(self, _: Any) -> None:
        """The processes are up: connect a client (off the GUI thread) to follow them."""
        cluster = self.cluster
        if cluster is None:
            return
        self._background(self._lifecycle,
                         lambda: _client(cluster.config, _CONNECT_TIMEOUT),
                         lambda client: self._connected(cluster, client), self._start_failed)

    def _connected(self, cluster: LocalCluster, client: JobClient) -> None:
        if self.cluster is not cluster:  # stopped while the client connected
            self._commands.submit(client.close)
            return
        self.bridge.connect_client(client)
        self._set(replace(self.state, mode=SessionMode.RUNNING, error=""))
        if client.observer_error:
            self._report(client.observer_error)

    def _start_failed(self, error: BaseException) -> None:
        message = f"cluster {self.state.cluster_id} did not start: {error}"
        self.stop(error=message)
        self._report(message)

    def _attached(self, client: JobClient) -> None:
        if self.state.mode is not SessionMode.ATTACHING:
            self._commands.submit(client.close)
            return
        self.bridge.connect_client(client)
        self._set(replace(self.state, mode=SessionMode.ATTACHED))
        if client.observer_error:
            self._report(client.observer_error)

    def _attach_failed(self, error: BaseException) -> None:
        self._set(SessionState(error=f"cannot attach to {self.state.cluster_id}: {error}"))
        self.notice.emit(self.state.error)

    def _report(self, message: str) -> None:
        log.warning("%s", message)
        self.notice.emit(message)

    def _set(self, state: SessionState) -> None:
        self.state = state
        self.state_changed.emit(state)

    def _background(self, executor: ThreadPoolExecutor, work: Callable[[], Any],
                    done: Callable[[Any], None] | None,
                    failed: Callable[[BaseException], None]) -> None:
        """Run ``work`` on ``executor``'s thread; ``done(result)`` or ``failed(error)``
        then runs on the GUI thread."""
        def run() -> None:  # the worker's thread
            try:
                result = work()
            except Exception as error:
                log.debug("background work failed", exc_info=True)
                self.bridge.call_on_gui_thread(lambda error=error: failed(error))
                return
            if done is not None:
                self.bridge.call_on_gui_thread(lambda: done(result))

        executor.submit(run)


def known_clusters() -> list[str]:
    """Ids of the clusters whose broker was started from this data dir at some time."""
    root = paths.data_dir() / "clusters"
    if not root.is_dir():
        return []
    return sorted(entry.name for entry in root.iterdir() if (entry / "broker.json").exists())


def _client(config: Config, connect_timeout: float, broker: BrokerAddress | None = None,
            role: str = "client") -> JobClient:
    """A client of ``config``'s cluster (worker thread: it blocks), with the observer login
    connected for the messages view when it can be: the client login reads no one
    else's messages (broker/acl.py). Why it could not is kept in ``observer_error``.
    ``broker``: a credentials file's address and login, which is of ``role``."""
    client = JobClient(config, broker, connect_timeout=connect_timeout, role=role)
    if broker is not None and role == "client":
        client.observer_error = ("the messages view stays empty: a client login reads no "
                                 "one else's messages (attach with an observer file for it)")
        return client
    try:
        client.open_observer(connect_timeout)
    except (RpcError, NoBrokerError) as error:
        client.observer_error = f"the messages view stays empty: {error}"
    return client


def savepoints_dir(config: Config) -> Path:
    """Where ``config``'s cluster keeps its savepoints, as its Dispatcher chooses it:
    ``state.savepoints.dir``, or ``savepoints`` in the cluster's folder. On this machine
    it is only where the submit dialog's Browse starts: a JobManager elsewhere has its
    own."""
    configured = config["state.savepoints.dir"]
    if configured:
        return Path(configured)
    return paths.cluster_dir(config["cluster.id"]) / "savepoints"


def credentials_attach(source: str | Path) -> tuple[Config, BrokerAddress, str]:
    """The configuration, broker address and role to attach with a file of ``clusterdeck
    credentials export --role client`` (or observer: watch only), from this or another
    machine; ValueError (ExportedCredentialsError) says why a file will not do."""
    exported = read(source)
    if exported.role not in ("client", "observer"):
        raise ValueError(f"{source} holds the {exported.role} login; attaching needs a "
                         "client or observer one (clusterdeck credentials export --role "
                         "client)")
    return load(None, {"cluster.id": exported.cluster_id}), exported.address, exported.role


def attach_config(cluster_id: str) -> Config:
    """The configuration a running cluster was started with (its run dir keeps it), so the
    client speaks with the same timeouts; the user's file when there is none."""
    written = run_dir(cluster_id) / "config.toml"
    if written.exists():
        return load(written)
    return load(None, {"cluster.id": cluster_id})
