"""The TaskManager's one SparkSession: started once, shared by every slot thread, and
started again in the same process when its JVM dies (``sparkhealth``).

``SparkHost`` keeps the session's life on the TaskExecutor's main thread: the start on a
worker (eager once registered, else at the first deployment), the cluster's ``spark.*``
settings from the registration, the JVM's health asked each heartbeat round and
deployment, and the restart after the JVM died. The session functions below run on
worker threads.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from clusterdeck.core.config.settings import Config
from clusterdeck.core.engine.sparkwatch import start_rest_api
from clusterdeck.core.engine.workermarks import MARKS_VARIABLE, marks_folder
from clusterdeck.core.node import exitcodes
from clusterdeck.core.taskmanager.endpoint import Endpoint
from clusterdeck.core.taskmanager.sparkhealth import JvmExit, SparkJvm

log = logging.getLogger(__name__)


def spark_master(config: Config) -> str:
    return config["spark.master"] or f"local[{config['taskmanager.slots']}]"


def session_settings(config: Config, resource_id: str, scratch: Path) -> dict[str, str]:
    """Every property the TaskManager's SparkSession is built with: the TaskManager's own
    defaults, then the cluster's ``spark.*`` properties, which win — they are what the
    user asked for, and none of the defaults is needed for a task to run. The one merge:
    ``spark.driver.extraJavaOptions`` keeps the TaskManager's Derby home in front of the
    user's options, so that Derby's files stay in the scratch dir unless the user's own
    ``-Dderby.system.home`` (later on the line, so it wins) moves them."""
    derby_home = f"-Dderby.system.home={scratch}"
    own = {"spark.master": spark_master(config),
           "spark.app.name": f"clusterdeck-{resource_id}",
           # Spark's UI, for the window's Open Spark UI: on a free port (two TaskManagers
           # share a machine), bound to 127.0.0.1 with a local master (SPARK_LOCAL_IP), and
           # nobody kills jobs from it. spark.ui.enabled = false turns it off.
           "spark.ui.enabled": "true",
           "spark.ui.port": "0",
           "spark.ui.killEnabled": "false",
           "spark.ui.showConsoleProgress": "false",
           # Python workers over Unix domain sockets rather than TCP on loopback: a Spark
           # job of one Python task took 56 ms instead of 92, and its TaskManager 40% less
           # CPU (docs/benchmarks.md, section 14). Spark before 4.1 ignores the key.
           "spark.python.unix.domain.socket.enabled": "true",
           "spark.sql.shuffle.partitions": str(max(2, config["taskmanager.slots"])),
           "spark.sql.warehouse.dir": str(scratch / "warehouse"),
           # where its Python workers note whose records they run (a vertex's flame graph)
           f"spark.executorEnv.{MARKS_VARIABLE}": str(marks_folder(scratch)),
           "spark.driver.extraJavaOptions": derby_home}
    users = config.spark_properties()
    if "spark.driver.extraJavaOptions" in users:
        users["spark.driver.extraJavaOptions"] = (
            f"{derby_home} {users['spark.driver.extraJavaOptions']}")
    return {**own, **users}


def start_spark(config: Config, resource_id: str, scratch: Path) -> Any:
    """Blocking (seconds): run it on a worker thread, never on an endpoint's main thread."""
    from pyspark.sql import SparkSession

    marks_folder(scratch).mkdir(parents=True, exist_ok=True)
    # Spark's Python workers must run the same interpreter as this process.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = spark_master(config)
    if master.startswith("local"):
        # A local Spark needs no network interface; without this it looks one up and warns.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    for key, value in session_settings(config, resource_id, scratch).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    log.info("SparkSession started (master %s, Spark %s)", master, session.version)
    if config["taskmanager.spark-work.follow"]:
        start_rest_api(session.sparkContext)
    return session


def restart_spark(dead: Any, config: Config, resource_id: str, scratch: Path) -> Any:
    """Blocking (seconds), on a worker thread: a new SparkSession in place of ``dead``, whose
    JVM has died. PySpark keeps its gateway, JVM view, active context and sessions in class
    attributes and would hand the dead ones back, so they are forgotten first; the dead
    session's own threads (its accumulator server, Py4J's callback server) are stopped."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession, SQLContext

    context = dead.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        server.shutdown()
        server.server_close()
    with SparkContext._lock:
        gateway = SparkContext._gateway
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
        context._jsc = None  # SparkContext.stop() would call the dead JVM through it
    if gateway is not None:
        # Its shutdown command meets closed sockets at once (logged, not raised); what
        # it frees is this process's: the connections and the callback server's thread.
        gateway.shutdown()
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None
    log.info("forgot the dead SparkSession; starting a new one")
    return start_spark(config, resource_id, scratch)


class SparkHost:
    """The SparkSession's life, on the TaskExecutor's main thread. ``on_lost(ended)`` is
    told when the JVM died, before the new session starts: it fails the running attempts.
    ``start`` and ``restart``: how a session starts (``start_spark``, ``restart_spark``);
    a test gives its own."""

    def __init__(self, endpoint: Endpoint, config: Config, resource_id: str, scratch: Path,
                 on_lost: Callable[[JvmExit], None],
                 start: Callable[[Config, str, Path], Any] = start_spark,
                 restart: Callable[[Any, Config, str, Path], Any] = restart_spark) -> None:
        self._endpoint = endpoint
        self.config = config
        self._resource_id = resource_id
        self._scratch = scratch
        self._on_lost = on_lost
        self._start = start
        self._restart = restart
        self._session: Future[Any] | None = None
        self._jvm: SparkJvm | None = None  # the JVM of the started session, watched
        # Started once registered: the answer carries the cluster's Spark settings.
        self.start_when_registered = False

    @property
    def ready(self) -> bool:
        """Started without error; while it starts again after its JVM died it is not, so
        the ResourceManager prefers other TaskManagers' slots."""
        session = self._session
        return session is not None and session.done() and session.exception() is None

    def started(self) -> Any | None:
        """The session once it is ready, else None (nothing waits for it)."""
        return self._session.result() if self.ready and self._session is not None else None

    def session(self) -> Future[Any]:
        """The SparkSession, started on a worker at the first call. A JVM that died is
        noticed here too, so a deployment never gets the dead session."""
        self.check()
        if self._session is None:
            self._session = self._begin()
        return self._session

    def take_cluster_settings(self, cluster: dict[str, str]) -> None:
        """The cluster's ``spark.*`` settings under this TaskManager's own, for a session
        not started yet; then the eager start waited for them."""
        own = self.config.spark_properties()
        wanted = {**cluster, **own}
        if self._session is None:
            self.config = self.config.with_overrides(wanted)
        elif wanted != own:
            log.warning("the cluster's Spark settings differ from those this TaskManager's "
                        "session started with; they apply after its restart")
        if self.start_when_registered:
            self.start_when_registered = False
            self.session()

    def check(self) -> None:
        """Each heartbeat round and deployment: a Spark JVM that died fails the running
        attempts with that cause, and a new SparkSession starts on a worker. One
        non-blocking waitpid, no Py4J call."""
        jvm = self._jvm
        ended = jvm.exit() if jvm is not None else None
        if ended is None:
            return
        self._jvm = None
        self._on_lost(ended)
        assert self._session is not None  # a JVM is watched only once its session started
        self._session = self._begin(dead=self._session.result())

    def _begin(self, dead: Any = None) -> Future[Any]:
        """A SparkSession started on a worker; in place of the ``dead`` one if given."""
        if dead is None:
            future = self._endpoint.run_in_worker(self._start, self.config, self._resource_id,
                                                  self._scratch, name="spark-start")
        else:
            future = self._endpoint.run_in_worker(self._restart, dead, self.config,
                                                  self._resource_id, self._scratch,
                                                  name="spark-restart")
        restart = dead is not None
        self._endpoint.on_main_thread(future, lambda session, error: self._began(
            future, restart, session, error))
        return future

    def _began(self, future: Future[Any], restart: bool, session: Any,
               error: BaseException | None) -> None:
        """Watch the new session's JVM. The attempts waiting for a Spark that failed to
        start fail with its error; a first start that failed is tried again at the next
        deployment, so one bad start does not fail every later attempt. A Spark that
        cannot start again after its JVM died leaves this process in doubt: it exits, and
        its supervisor starts a fresh TaskManager."""
        if future is not self._session:
            return
        if error is None:
            self._jvm = SparkJvm.of(session)
            if self._jvm is None:
                log.warning("Spark's JVM is not a child of this process: its health is not "
                            "watched")
        elif not restart:
            log.error("Spark did not start (%s); trying again at the next deployment", error)
            self._session = None
        else:
            log.critical("Spark could not start again after its JVM died (%s): this "
                         "TaskManager exits so that its supervisor restarts it", error)
            self._endpoint.schedule(1.0, os._exit, exitcodes.SPARK_LOST)
