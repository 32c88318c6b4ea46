"""The TaskExecutor: registers at the leading ResourceManager and keeps that registration.

It learns who leads from the retained ``state/leader`` topic, registers with backoff until
an answer comes, then heartbeats both ways. It registers again whenever the leader
changes, its JobManager's process goes offline, the ResourceManager stops answering
heartbeats, or the ResourceManager says it does not know it (e.g. after a hang).
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psutil

from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.heartbeat import HeartbeatMonitor
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.node import exitcodes
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.gateways import (
    DispatcherGateway,
    JobMasterGateway,
    ResourceManagerGateway,
)
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.rpc import (
    AskTimeoutError,
    FrameTooLargeError,
    RemoteError,
    RpcEndpoint,
    handler,
)
from clusterdeck.core.rpc.outbox import Linger, Outbox, send_in_halves
from clusterdeck.core.supervisor import RESTARTS_ENV
from clusterdeck.core.taskmanager.artifacts import load_artifact
from clusterdeck.core.taskmanager.attemptlogs import AttemptLogHandler
from clusterdeck.core.taskmanager.dataplane import DataPlane
from clusterdeck.core.taskmanager.deployment import with_inputs
from clusterdeck.core.taskmanager.jobfolders import Claims, claim, stand_ins_of, sweep
from clusterdeck.core.taskmanager.metrics import (
    IDLE_INTERVAL,
    INTERVAL,
    TaskMetrics,
    jvm_numbers,
)
from clusterdeck.core.taskmanager.runner import checkpoint_storage, printed_path, run_task
from clusterdeck.core.taskmanager.slots import SlotTable
from clusterdeck.core.taskmanager.slotworkers import SlotWorker
from clusterdeck.core.taskmanager.spark import restart_spark, start_spark
from clusterdeck.core.taskmanager.sparkhealth import SparkJvm
from clusterdeck.core.taskmanager.statefetch import fetch_restore_state
from clusterdeck.core.taskmanager.tasks import Task, TaskOutcome

OUTPUT_INTERVAL = 0.2  # seconds between two hand-ons of what running scripts printed
OUTPUT_PIECES_PER_TICK = 8  # per task: about 640,000 characters a second at most
STUCK_GRACE = 10.0  # seconds from cancel to interrupt to giving up on the process
UPDATES_PER_MESSAGE = 64  # an UpdateTaskExecutionStates' most updates
# Updates go at most once per UPDATE_LINGER: while tasks end by the hundred a second, a
# short task's RUNNING and FINISHED and the next task's RUNNING share one message (the
# JobMaster deploys ahead and does not wait for them). An update after a quiet spell goes
# at once: a lone job's latency is not taxed.
UPDATE_LINGER = 0.005

# A state update waiting to be sent: the deployment it concerns, the update, tries so far.
_Report = tuple[p.SubmitTask, p.UpdateTaskExecutionState, int]

log = logging.getLogger(__name__)
RESOURCE_MANAGER = "resourcemanager"


def endpoint_id_of(resource_id: str) -> str:
    return f"taskexecutor.{resource_id}"


class TaskExecutor(RpcEndpoint):
    def __init__(self, config: Config, resource_id: str, instance_id: str,
                 on_refused: Callable[[str], None] | None = None,
                 data_plane: DataPlane | None = None) -> None:
        super().__init__(endpoint_id_of(resource_id))
        self.config = config
        self.resource_id = resource_id
        self.instance_id = instance_id
        self.slots = SlotTable(config["taskmanager.slots"])
        self.leader: p.LeaderInfo | None = None
        self.registration: p.AcknowledgeRegistration | p.AlreadyRegistered | None = None
        self.interval: float = config["heartbeat.interval"]
        self._leader_heartbeats: HeartbeatMonitor[None] = HeartbeatMonitor.from_config(config)
        self._backoff: float = config["registration.initial-backoff"]
        self._attempt = 0
        self._retry_pending = False
        self._on_refused = on_refused
        self.data_plane = data_plane
        self._spark_after_registration = False
        self._os_process = psutil.Process()
        self.host = socket.gethostname()
        self.tasks: dict[str, Task] = {}  # running or deployed ahead, by attempt
        self._holders: dict[int, Task] = {}  # the task running in each slot
        self._queued: dict[int, collections.deque[Task]] = {}  # deployed ahead, per slot
        self._workers: dict[int, SlotWorker] = {}  # the thread of each slot
        self._output_ticking = False
        self._reporting: dict[str, str] = {}  # attempt -> job, final update not yet answered
        self._updates: Outbox[tuple[str, str], _Report] = Outbox(UPDATES_PER_MESSAGE)
        self._updates_linger = Linger(UPDATE_LINGER)
        self._jobs: dict[str, Future[LoadedJob]] = {}
        self._spark: Future[Any] | None = None
        self._spark_jvm: SparkJvm | None = None  # the JVM of the started session, watched
        cluster_id = config["cluster.id"]
        self.scratch = paths.cluster_dir(cluster_id) / "taskmanagers" / resource_id
        self.stand_ins = stand_ins_of(cluster_id)
        self._claims = Claims()
        self.metrics = TaskMetrics(resource_id)
        self._reading_heap = False
        self._metrics_generation = 0
        self._metrics_idle = False
        # One thread for every heap reading: one Py4J connection, not one per second.
        self._heap_reader = ThreadPoolExecutor(1, thread_name_prefix="jvm-heap")
        self.attempt_logs = AttemptLogHandler.from_config(
            paths.cluster_log_dir(cluster_id) / "attempts", config, journal=resource_id)
        logging.getLogger().addHandler(self.attempt_logs)

    def on_start(self) -> None:
        """Main thread: follow the leader and the JobManager's presence, start heartbeats,
        and start the SparkSession on a worker thread unless it is to start lazily.

        A TaskManager restarted after a crash starts Spark lazily: its JVM would take
        seconds of CPU from the tasks being recovered on the same machine, and the
        ResourceManager sends work to TaskManagers whose Spark is up first anyway."""
        service = self.rpc_service
        service.subscribe(topics.LEADER, lambda _t, m: self.run_async(self._on_leader, m))
        service.subscribe(topics.presence("jobmanager"),
                          lambda _t, m: self.run_async(self._on_jobmanager_presence, m))
        restarted = os.environ.get(RESTARTS_ENV, "0") not in ("", "0")
        # Started once registered: the answer carries the cluster's Spark settings.
        self._spark_after_registration = self.config["spark.start"] == "eager" \
            and not restarted
        self._heartbeat_round()
        self._metrics_tick()

    def on_stop(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        for worker in self._workers.values():
            worker.stop()
        self._heap_reader.shutdown(wait=False)
        logging.getLogger().removeHandler(self.attempt_logs)
        self.attempt_logs.close()  # the attempts that ended reach the disk

    def _slot_report(self) -> p.SlotReport:
        """Spark is ready once started without error; while it starts again after its JVM
        died it is not, so the ResourceManager prefers other TaskManagers' slots."""
        spark = self._spark
        return self.slots.report(spark_ready=spark is not None and spark.done()
                                 and spark.exception() is None)

    def spark(self) -> Future[Any]:
        """Main thread: the SparkSession, started on a worker at the first call. A JVM that
        died is noticed here too, so a deployment never gets the dead session."""
        self._check_spark()
        if self._spark is None:
            self._spark = self._start_spark()
        return self._spark

    def _start_spark(self, dead: Any = None) -> Future[Any]:
        """A SparkSession started on a worker; in place of the ``dead`` one if given."""
        if dead is None:
            future = self.run_in_worker(start_spark, self.config, self.resource_id,
                                        self.scratch, name="spark-start")
        else:
            future = self.run_in_worker(restart_spark, dead, self.config, self.resource_id,
                                        self.scratch, name="spark-restart")
        restart = dead is not None
        self.on_main_thread(future, lambda session, error: self._spark_started(
            future, restart, session, error))
        return future

    def _spark_started(self, future: Future[Any], restart: bool, session: Any,
                       error: BaseException | None) -> None:
        """Main thread: watch the new session's JVM. The attempts waiting for a Spark that
        failed to start fail with its error; a first start that failed is tried again at the
        next deployment, so one bad start does not fail every later attempt. A Spark that
        cannot start again after its JVM died leaves this process in doubt: it exits, and
        its supervisor starts a fresh TaskManager."""
        if future is not self._spark:
            return
        if error is None:
            self._spark_jvm = SparkJvm.of(session)
            if self._spark_jvm is None:
                log.warning("Spark's JVM is not a child of this process: its health is not "
                            "watched")
        elif not restart:
            log.error("Spark did not start (%s); trying again at the next deployment", error)
            self._spark = None
        else:
            log.critical("Spark could not start again after its JVM died (%s): this "
                         "TaskManager exits so that its supervisor restarts it", error)
            self.schedule(1.0, os._exit, exitcodes.SPARK_LOST)

    def _check_spark(self) -> None:
        """Main thread, each heartbeat round and deployment: a Spark JVM that died fails the
        running attempts with that cause, and a new SparkSession starts on a worker. One
        non-blocking waitpid, no Py4J call."""
        jvm = self._spark_jvm
        ended = jvm.exit() if jvm is not None else None
        if ended is None:
            return
        self._spark_jvm = None
        log.error("%s; failing %d running attempt(s) and starting Spark again", ended,
                  len(self.tasks))
        for task in list(self.tasks.values()):
            task.fail(ended.failure(log_excerpt=self.attempt_logs.excerpt(task.attempt_id)))
            self._end_if_queued(task)
        assert self._spark is not None  # a JVM is watched only once its session started
        self._spark = self._start_spark(dead=self._spark.result())

    @property
    def is_registered(self) -> bool:
        return self.registration is not None

    # -- leader and registration ------------------------------------------------------------

    def _on_leader(self, leader: Any) -> None:
        if not isinstance(leader, p.LeaderInfo):
            return
        if self.leader and leader.fencing_token == self.leader.fencing_token:
            return
        log.info("new leader: JobManager pid %d on %s", leader.pid, leader.host)
        if self.leader is not None:
            self._fail_tasks("their JobManager was replaced")
        self.leader = leader
        self._reset_registration()
        self._register()

    def _on_jobmanager_presence(self, presence: Any) -> None:
        if isinstance(presence, p.Presence) and presence.status is p.PresenceStatus.OFFLINE:
            if self.registration is not None:
                log.warning("JobManager went offline; registering again when one answers")
            self._fail_tasks("their JobManager went offline")
            self._reset_registration()
            self._schedule_retry()

    def _reset_registration(self) -> None:
        self.registration = None
        self._leader_heartbeats.unmonitor(RESOURCE_MANAGER)
        self._attempt += 1
        self._backoff = self.config["registration.initial-backoff"]

    def _register(self) -> None:
        if self.leader is None or self.registration is not None:
            return
        attempt = self._attempt
        request = p.RegisterTaskManager(
            cluster_id=self.config["cluster.id"], protocol_version=p.PROTOCOL_VERSION,
            resource_id=self.resource_id, instance_id=self.instance_id,
            endpoint_id=self.endpoint_id, host=socket.gethostname(), pid=os.getpid(),
            slot_report=self._slot_report(), **self._data_service())
        timeout = min(self.config["rpc.ask-timeout"], max(1.0, self._backoff * 4))
        future = self._rm_gateway().register_task_manager(request, timeout)
        self.on_main_thread(future, lambda answer, error: self._on_registration_answer(
            attempt, answer, error))

    def _data_service(self) -> dict[str, str]:
        """What the registration announces of the data service (nothing without one)."""
        plane = self.data_plane
        if plane is None:
            return {}
        return {"data_url": plane.address.url, "data_fingerprint": plane.address.fingerprint,
                "data_key": plane.key, "stream_address": plane.stream_address}

    def _on_registration_answer(self, attempt: int, answer: Any,
                                error: BaseException | None) -> None:
        if attempt != self._attempt or self.registration is not None:
            return  # an answer to an attempt made for an earlier leader
        if isinstance(answer, p.AcknowledgeRegistration | p.AlreadyRegistered):
            self.registration = answer
            self._backoff = self.config["registration.initial-backoff"]
            self._leader_heartbeats.monitor(RESOURCE_MANAGER, time.monotonic())
            log.info("registered at %s as %s", answer.resource_manager, self.resource_id)
            self._take_cluster_spark_settings(answer.spark_properties)
            return
        if isinstance(answer, p.RefuseRegistration):
            log.error("registration refused: %s", answer.reason)
            if self._on_refused is not None:
                self._on_refused(answer.reason)
                return
        else:
            log.info("registration attempt failed (%s); retrying in %.1f s", error,
                     self._backoff)
        self._schedule_retry()

    def _take_cluster_spark_settings(self, cluster: dict[str, str]) -> None:
        """The cluster's ``spark.*`` settings under this TaskManager's own, for a session
        not started yet; then the eager start waited for them."""
        own = self.config.spark_properties()
        wanted = {**cluster, **own}
        if self._spark is None:
            self.config = self.config.with_overrides(wanted)
        elif wanted != own:
            log.warning("the cluster's Spark settings differ from those this TaskManager's "
                        "session started with; they apply after its restart")
        if self._spark_after_registration:
            self._spark_after_registration = False
            self.spark()

    def _schedule_retry(self) -> None:
        if self._retry_pending:
            return
        self._retry_pending = True
        delay = self._backoff
        self._backoff = min(self._backoff * 2, self.config["registration.max-backoff"])

        def retry() -> None:
            self._retry_pending = False
            self._register()
        self.schedule(delay, retry)

    def _rm_gateway(self) -> ResourceManagerGateway:
        assert self.leader is not None
        token = self.registration.fencing_token if self.registration else None
        return self.rpc_service.gateway(ResourceManagerGateway, self.leader.resource_manager,
                                        token or self.leader.fencing_token)

    # -- liveness ---------------------------------------------------------------------------------

    @handler(p.ResourceManagerHeartbeat, senders=(topics.JOBMANAGER,))
    def heartbeat_from_resource_manager(self, heartbeat: p.ResourceManagerHeartbeat) -> None:
        if self.registration and heartbeat.registration_id == self.registration.registration_id:
            self._leader_heartbeats.receive(RESOURCE_MANAGER, None, time.monotonic())

    @handler(p.DisconnectTaskManager, senders=(topics.JOBMANAGER,))
    def disconnect(self, msg: p.DisconnectTaskManager) -> None:
        log.warning("the ResourceManager disconnected us: %s", msg.reason)
        # Declared lost: the JobMasters failed these tasks and will refuse their updates.
        self._fail_tasks("this TaskManager was declared lost")
        self._reset_registration()
        self._register()

    def _heartbeat_round(self) -> None:
        self._check_spark()
        now = time.monotonic()
        if self._leader_heartbeats.lost_targets(now):
            log.warning("the ResourceManager stopped answering heartbeats; registering again")
            self._fail_tasks("the ResourceManager stopped answering")
            self._reset_registration()
            self._register()
        if self.registration is not None:
            self._rm_gateway().heartbeat_from_task_manager(p.TaskManagerHeartbeat(
                self.resource_id, self.registration.registration_id, self._slot_report(),
                cpu_percent=self._os_process.cpu_percent(None),
                memory_bytes=self._os_process.memory_info().rss))
        self.schedule(self.interval, self._heartbeat_round)

    # -- tasks -------------------------------------------------------------------------------------

    @handler(p.SubmitTasks, senders=(topics.JOBMANAGER,))
    def submit_tasks(self, batch: p.SubmitTasks) -> p.TaskOperationResults:
        return p.TaskOperationResults(tuple(self._submit(task) for task in batch.deployments()))

    def _submit(self, task: p.SubmitTask) -> p.TaskOperationResult:
        if not self.is_registered:
            return p.TaskOperationResult(task.attempt_id, False, "not registered")
        if task.attempt_id in self.tasks:
            return p.TaskOperationResult(task.attempt_id, True, "already running")
        try:
            self.slots.allocate(task.slot_index, task.allocation_id, task.job_id)
        except (ValueError, IndexError) as error:
            return p.TaskOperationResult(task.attempt_id, False, str(error))
        jobmaster = self.rpc_service.gateway(JobMasterGateway, task.jobmaster,
                                             task.fencing_token)
        claimed = self._claims.fresh(task.work_dir)

        def run(spark: Any, job: LoadedJob, deployment: p.SubmitTask, t: Task) -> p.TaskResult:
            kept = claimed
            if kept is None:
                kept, made = claim(deployment.work_dir, self.stand_ins)
                self.run_async(self._claimed, deployment.work_dir, kept, made)
            fetch_restore_state(deployment, checkpoint_storage(kept), jobmaster)
            return run_task(spark, job, with_inputs(deployment, jobmaster), t, kept)
        running = Task(task, self.spark(), self._job(task), self._split_source(task,
                       jobmaster), run, self.attempt_logs,
                       lambda t, outcome: self.run_async(self._task_done, t, outcome))
        running.report_checkpoint = lambda message: self.run_async(
            self._checkpoint_report, jobmaster, message)
        running.channels = self.data_plane.channels if self.data_plane else None
        running.broker = self.data_plane.broker if self.data_plane else None
        self.tasks[task.attempt_id] = running
        if task.slot_index in self._holders:  # deployed ahead: it starts when the slot frees
            self._queued.setdefault(task.slot_index, collections.deque()).append(running)
            running.start(self._worker(task.slot_index))  # its thread starts it then
        else:
            self._begin(running)
        return p.TaskOperationResult(task.attempt_id, True)

    @handler(p.TriggerCheckpoint, senders=(topics.JOBMANAGER,))
    def trigger_checkpoint(self, trigger: p.TriggerCheckpoint) -> None:
        self._to_task(trigger.job_id, trigger.attempt_id, trigger)

    @handler(p.NotifyCheckpointComplete, senders=(topics.JOBMANAGER,))
    def notify_checkpoint_complete(self, notice: p.NotifyCheckpointComplete) -> None:
        self._to_task(notice.job_id, notice.attempt_id, notice)

    @handler(p.NotifyCheckpointAborted, senders=(topics.JOBMANAGER,))
    def notify_checkpoint_aborted(self, notice: p.NotifyCheckpointAborted) -> None:
        self._to_task(notice.job_id, notice.attempt_id, notice)

    def _to_task(self, job_id: str, attempt_id: str, message: Any) -> None:
        """A streaming task's checkpoint message, for its thread. One for an attempt that
        is gone is dropped: its JobMaster learns of the attempt's end on its own."""
        task = self.tasks.get(attempt_id)
        if task is not None and task.deployment.job_id == job_id:
            task.checkpoint_control.put(message)

    def _checkpoint_report(self, jobmaster: JobMasterGateway, message: Any) -> None:
        if isinstance(message, p.AcknowledgeCheckpoint):
            jobmaster.acknowledge_checkpoint(message)
        else:
            jobmaster.decline_checkpoint(message)

    def _begin(self, task: Task) -> None:
        """Start the task in its slot, which it now holds, and report it RUNNING."""
        deployment = task.deployment
        self._holders[deployment.slot_index] = task
        if not task.handed:  # one deployed ahead was handed to the slot's thread already
            task.start(self._worker(deployment.slot_index))
        self.metrics.began(task)
        if self._metrics_idle:  # the idle tick is seconds away: the first numbers go sooner
            self._metrics_tick()
        self._tick_output()
        if deployment.task_timeout > 0:
            self.schedule(deployment.task_timeout, self._task_overdue, task)
        self._report(deployment, p.UpdateTaskExecutionState(deployment.job_id, task.attempt_id,
                                                            ExecutionState.RUNNING))

    def _end_if_queued(self, task: Task) -> None:
        """A task cancelled or failed while it waits behind its slot's holder ends now, as
        it was told, unless the slot's thread has already begun it (it then ends as soon
        as it sees the cancel; it starts no Spark work)."""
        queue = self._queued.get(task.deployment.slot_index)
        if queue is not None and task in queue:
            queue.remove(task)
            if task.claim():
                task.end_unstarted()

    def _worker(self, slot_index: int) -> SlotWorker:
        worker = self._workers.get(slot_index)
        if worker is None:
            worker = self._workers[slot_index] = SlotWorker(slot_index)
        return worker

    def _output_tick(self) -> None:
        """Main thread, every OUTPUT_INTERVAL while tasks run: what their scripts printed
        since the last tick goes to their JobMasters, for the submitters to show; their
        attempt log lines held in memory go to disk."""
        self._output_ticking = False
        self.attempt_logs.flush_held()
        for task in self.tasks.values():
            self._send_output(task, self.rpc_service.gateway(
                JobMasterGateway, task.deployment.jobmaster, task.deployment.fencing_token))
        self._tick_output()

    def _tick_output(self) -> None:
        if self.tasks and not self._output_ticking:
            self._output_ticking = True
            self.schedule(OUTPUT_INTERVAL, self._output_tick)

    def _send_output(self, task: Task, jobmaster: JobMasterGateway,
                     most: int | None = OUTPUT_PIECES_PER_TICK) -> None:
        deployment = task.deployment
        for piece in task.live.take(p.OUTPUT_PIECE, most or sys.maxsize):
            jobmaster.task_output(p.TaskOutput(
                deployment.job_id, task.attempt_id, piece.stream,
                printed_path(deployment.work_dir, task.attempt_id, piece.stream),
                piece.offset, piece.text))

    def _metrics_tick(self, generation: int | None = None) -> None:
        """Main thread, every INTERVAL while attempts run (IDLE_INTERVAL else): the live
        numbers out (core/taskmanager/metrics.py), and the heap read again on a worker.
        Called without ``generation`` it starts a new chain of ticks; the older chain's
        next tick then does nothing."""
        if generation is None:
            self._metrics_generation += 1
        elif generation != self._metrics_generation:
            return
        self._publish_metrics(self.metrics.messages(self.tasks.values()))
        spark = self._spark
        if not self._reading_heap and spark is not None and spark.done() \
                and spark.exception() is None:
            self._reading_heap = True
            reading = self._heap_reader.submit(jvm_numbers, spark.result())
            self.on_main_thread(reading, self._heap_read)
        self._metrics_idle = not self.metrics.busy
        self.schedule(IDLE_INTERVAL if self._metrics_idle else INTERVAL, self._metrics_tick,
                      self._metrics_generation)

    def _publish_metrics(self, messages: list[p.TaskManagerMetrics]) -> None:
        for message in messages:
            self.rpc_service.publish(topics.metrics(self.resource_id), message, qos=0)

    def _heap_read(self, numbers: tuple[int, int, str] | None,
                   error: BaseException | None) -> None:
        self._reading_heap = False
        # A JVM that does not answer shows as an unknown heap; its death is _check_spark's.
        if numbers is None or error is not None:
            self.metrics.heap = (-1, -1)
            return
        self.metrics.heap, self.metrics.spark_ui = (numbers[0], numbers[1]), numbers[2]

    def _claimed(self, work_dir: str, kept: str, made: bool) -> None:
        self._claims.store(work_dir, kept)
        if made:
            self._sweep_job_folders(os.path.dirname(kept))

    def _sweep_job_folders(self, jobs_folder: str) -> None:
        """Main thread: a task made a job folder on this machine; apply this machine's
        job retention to such folders (core/taskmanager/jobfolders.py), on a worker."""
        work_dirs = [t.deployment.work_dir for t in self.tasks.values()]
        swept = self.run_in_worker(sweep, jobs_folder, self.config["jobstore.retention.max-jobs"],
                                   self.config["jobstore.retention.max-age"], work_dirs,
                                   self.stand_ins, name="job-retention")
        self.on_main_thread(swept, lambda _gone, error: error and log.warning(
            "could not apply job retention to %s: %s", jobs_folder, error))

    @handler(p.CancelTask, senders=(topics.JOBMANAGER,))
    def cancel_task(self, request: p.CancelTask) -> p.TaskOperationResult:
        task = self.tasks.get(request.attempt_id)
        if task is None:
            return p.TaskOperationResult(request.attempt_id, True, "not running here",
                                         known=False)
        task.cancel()
        self._end_if_queued(task)
        return p.TaskOperationResult(request.attempt_id, True)

    @handler(p.RequestExecutionReport, senders=(topics.JOBMANAGER,))
    def request_execution_report(self, request: p.RequestExecutionReport
                                 ) -> p.ExecutionReport:
        """The JobMaster's half of deployment reconciliation: what of its job runs here."""
        return p.ExecutionReport(
            self.resource_id,
            running=tuple(a for a, t in self.tasks.items()
                          if t.deployment.job_id == request.job_id),
            reporting=tuple(a for a, job_id in self._reporting.items()
                            if job_id == request.job_id))

    def _job(self, task: p.SubmitTask) -> Future[LoadedJob]:
        """One download and one load of a job's artifact per TaskManager, on a worker."""
        future = self._jobs.get(task.job_id)
        if future is None or (future.done() and future.exception() is not None):
            assert self.leader is not None
            dispatcher = self.rpc_service.gateway(DispatcherGateway, self.leader.dispatcher,
                                                  self.leader.fencing_token)
            future = self.run_in_worker(load_artifact, dispatcher, task, self.scratch / "jobs",
                                        name="artifact")
            self._jobs[task.job_id] = future
        return future

    def _split_source(self, task: p.SubmitTask,
                      jobmaster: JobMasterGateway) -> Callable[[int], Any]:
        """Called on the slot thread, where a blocking ask is fine. A request that gets no
        answer (the broker was restarting) is sent again with the same sequence number,
        which the JobMaster answers with the same split."""
        patience = self.config["heartbeat.timeout"] * 4

        def next_split(sequence: int) -> Any:
            request = p.RequestNextInputSplit(task.job_id, task.attempt_id, self.host, sequence)
            deadline = time.monotonic() + patience
            while True:
                try:
                    return jobmaster.request_next_input_split(request).result().split
                except AskTimeoutError:
                    if time.monotonic() > deadline:
                        raise
        return next_split

    def _task_done(self, task: Task, outcome: TaskOutcome) -> None:
        """Main thread: free the slot first, so the next deployment finds it free (or start
        the one deployed ahead into it); the last of what it printed goes before its final
        state, which goes before the next task's RUNNING."""
        self.tasks.pop(task.attempt_id, None)
        index = task.deployment.slot_index
        queue = self._queued.get(index) or collections.deque()
        following = None
        if self._holders.get(index) is task:
            del self._holders[index]
            following = queue.popleft() if queue else None
            if following is None:
                self.slots.free(index)
        jobmaster = self.rpc_service.gateway(JobMasterGateway, task.deployment.jobmaster,
                                             task.deployment.fencing_token)
        self._send_output(task, jobmaster, most=None)
        self.metrics.ended(task, outcome)
        self._report(task.deployment, p.UpdateTaskExecutionState(
            task.deployment.job_id, task.attempt_id, outcome.state, outcome.failure,
            outcome.result))
        if following is not None:
            self._begin(following)

    def _report(self, deployment: p.SubmitTask, update: p.UpdateTaskExecutionState,
                tries: int = 0) -> None:
        """Queued: the updates of this turn (of ``UPDATE_LINGER`` when busy) go to each
        JobMaster in one message, sent until acknowledged. Until then the attempt is
        listed as still reporting in execution reports; one given up on is not, and the
        JobMaster's reconciliation then fails it as lost instead of waiting for ever."""
        if update.state.is_terminal:
            self._reporting[update.attempt_id] = update.job_id
        if self._updates.add((deployment.jobmaster, deployment.fencing_token),
                             (deployment, update, tries)):
            wait = self._updates_linger.delay(time.monotonic())
            if wait > 0:
                self.schedule(wait, self._send_updates)
            else:
                self.run_async(self._send_updates)

    def _send_updates(self) -> None:
        self._updates_linger.flushed(time.monotonic())
        # An ended attempt's last numbers go ahead of its end, not up to a second later:
        # who reads them when the job ends (the window, an export) has them.
        self._publish_metrics(self.metrics.ended_messages())
        for (jobmaster, token), reports in self._updates.take():
            gateway = self.rpc_service.gateway(JobMasterGateway, jobmaster, token)
            send_in_halves(reports, lambda batch, to=gateway: self._send_update_batch(
                to, batch), self._update_too_large)

    def _send_update_batch(self, jobmaster: JobMasterGateway,
                           reports: tuple[_Report, ...]) -> None:
        sent = jobmaster.update_task_execution_states(
            p.UpdateTaskExecutionStates(tuple(update for _, update, _ in reports)))
        self.on_main_thread(sent, lambda answer, error: self._updates_answered(
            reports, answer, error))

    def _update_too_large(self, report: _Report, error: FrameTooLargeError) -> None:
        """Dropping it would leave the job RUNNING for ever: the attempt fails instead,
        with a cause that names the limit, in an update that is small by design."""
        deployment, update, tries = report
        log.error("update %s of %s is too large to send: %s", update.state,
                  update.attempt_id, error)
        self._report(deployment, p.UpdateTaskExecutionState(
            update.job_id, update.attempt_id, ExecutionState.FAILED,
            TaskFailure("FrameTooLargeError", f"the task's {update.state} update could "
                        f"not be sent: {error}")), tries)

    def _updates_answered(self, reports: tuple[_Report, ...], answer: Any,
                          error: BaseException | None) -> None:
        acknowledgements = answer.acknowledgements if \
            isinstance(answer, p.UpdatesAcknowledged) else ()
        if error is None and len(acknowledgements) != len(reports):
            error = ValueError(f"{len(acknowledgements)} acknowledgements of "
                               f"{len(reports)} updates")
        fenced = isinstance(error, RemoteError) and \
            error.type_name == "FencingTokenMismatchError"
        for index, (deployment, update, tries) in enumerate(reports):
            if error is None or fenced:
                self._reporting.pop(update.attempt_id, None)
                ack = acknowledgements[index] if acknowledgements else None
                if ack is not None and not ack.accepted:
                    log.info("update %s of %s not accepted: %s", update.state,
                             update.attempt_id, ack.reason)
            elif tries >= 20:
                self._reporting.pop(update.attempt_id, None)
                log.error("giving up on reporting %s of %s: %s", update.state,
                          update.attempt_id, error)
            else:
                self.schedule(min(2.0, 0.1 * 2 ** tries), self._report, deployment, update,
                              tries + 1)

    def _fail_tasks(self, why: str) -> None:
        """Without its JobMaster a task's result has nowhere to go: cancel them all and free
        the slots; the recovered JobMaster schedules the work again."""
        if self.tasks:
            log.warning("cancelling %d running task(s): %s", len(self.tasks), why)
        for task in list(self.tasks.values()):
            task.cancel()
            self._end_if_queued(task)

    # -- stuck tasks: cancel the Spark work, then interrupt, then give up on this process -----

    def _task_overdue(self, task: Task) -> None:
        if self.tasks.get(task.attempt_id) is not task:
            return
        timeout = task.deployment.task_timeout
        log.warning("attempt %s exceeded its timeout of %g s: cancelling", task.attempt_id,
                    timeout)
        task.fail(TaskFailure("TaskTimeoutError",
                              f"the task ran longer than its timeout of {timeout:g} s",
                              log_excerpt=self.attempt_logs.excerpt(task.attempt_id)))
        self.schedule(STUCK_GRACE / 2, self._task_still_stuck, task, "interrupt")

    def _task_still_stuck(self, task: Task, step: str) -> None:
        if not task.alive:
            return
        if step == "interrupt":
            log.warning("attempt %s ignores its cancel: interrupting its thread", task.attempt_id)
            task.interrupt()
            self.schedule(STUCK_GRACE / 2, self._task_still_stuck, task, "give up")
            return
        log.critical("attempt %s cannot be stopped: this TaskManager is unhealthy and exits "
                     "so that its supervisor restarts it", task.attempt_id)
        self._task_done(task, TaskOutcome(ExecutionState.FAILED, failure=task.failure))
        self.schedule(1.0, os._exit, exitcodes.UNHEALTHY)
