"""The TaskExecutor: the TaskManager's endpoint, which runs the tasks its JobMasters deploy.

It receives the messages of the ResourceManager (heartbeats, disconnects) and of the
JobMasters (deployments, cancels, checkpoint messages, reconciliation) and hands each
concern to a collaborator that keeps its state on this endpoint's main thread:
- ``registration.Registration``: the leader, the registration and the heartbeats;
- ``spark.SparkHost``: the SparkSession's life and its JVM's health;
- ``slotqueue.SlotQueue``: each slot's holder and the tasks deployed ahead of it;
- ``updates.StateUpdates``: the state updates to the JobMasters, sent until acknowledged;
- ``stucktasks.StuckTasks``: tasks past their timeout;
- ``outputrelay.OutputRelay`` and ``metricsticks.MetricsTicks``: what the tasks print,
  and their live numbers; ``sparkworkrelay.SparkWorkRelay``: a script's Spark jobs;
- ``jobfolders.JobFolders``: the job folders on this machine and their retention.
A task itself runs on its slot's thread (tasks.py) and comes back here when it ends.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.engine.workermarks import marks_folder
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.node.hostidentity import host_identity
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.gateways import DispatcherGateway, JobMasterGateway
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.rpc import (
    AskTimeoutError,
    FencingTokenMismatchError,
    Invocation,
    RpcEndpoint,
    handler,
)
from clusterdeck.core.streaming.statebackend import StateBackend, StateBackendOptions
from clusterdeck.core.supervisor import RESTARTS_ENV
from clusterdeck.core.taskmanager.artifacts import load_artifact
from clusterdeck.core.taskmanager.attemptlogs import AttemptLogHandler
from clusterdeck.core.taskmanager.dataplane import DataPlane
from clusterdeck.core.taskmanager.deployment import with_inputs
from clusterdeck.core.taskmanager.fulldisk import naming_a_full_disk
from clusterdeck.core.taskmanager.jobfolders import JobFolders, stand_ins_of
from clusterdeck.core.taskmanager.metricsticks import MetricsTicks
from clusterdeck.core.taskmanager.outputrelay import OutputRelay
from clusterdeck.core.taskmanager.registration import Registration
from clusterdeck.core.taskmanager.runner import checkpoint_storage, run_task
from clusterdeck.core.taskmanager.slotqueue import SlotQueue
from clusterdeck.core.taskmanager.slots import SlotTable
from clusterdeck.core.taskmanager.spark import SparkHost
from clusterdeck.core.taskmanager.sparkhealth import JvmExit
from clusterdeck.core.taskmanager.sparkworkrelay import SparkWorkRelay
from clusterdeck.core.taskmanager.statefetch import fetch_restore_state
from clusterdeck.core.taskmanager.stucktasks import StuckTasks
from clusterdeck.core.taskmanager.tasks import SplitSource, Task, TaskOutcome, TaskServices
from clusterdeck.core.taskmanager.updates import StateUpdates

log = logging.getLogger(__name__)


def endpoint_id_of(resource_id: str) -> str:
    return f"taskexecutor.{resource_id}"


# A leader's orders besides deployments (whose token is in the message): each carries its
# token in the envelope, and one of an older epoch is refused (docs/ha.md). A stale
# ResourceManager's disconnect would fail every task here and register again.
_LEADER_ORDERS = (p.CancelTask, p.TriggerCheckpoint, p.NotifyCheckpointComplete,
                  p.NotifyCheckpointAborted, p.RequestExecutionReport, p.DisconnectTaskManager)


class TaskExecutor(RpcEndpoint):
    def __init__(self, config: Config, resource_id: str, instance_id: str,
                 on_refused: Callable[[str], None] | None = None,
                 data_plane: DataPlane | None = None) -> None:
        super().__init__(endpoint_id_of(resource_id))
        self.config = config
        self.resource_id = resource_id
        self.data_plane = data_plane
        self.host = host_identity()  # the splits of the JobManager's local files name it
        self.slots = SlotTable(config["taskmanager.slots"])
        self.tasks: dict[str, Task] = {}  # running or deployed ahead, by attempt
        self._jobs: dict[str, Future[LoadedJob]] = {}
        self.interval: float = config["heartbeat.interval"]
        cluster_id = config["cluster.id"]
        self.scratch = paths.cluster_dir(cluster_id) / "taskmanagers" / resource_id
        self.attempt_logs = AttemptLogHandler.from_config(
            paths.cluster_log_dir(cluster_id) / "attempts", config, journal=resource_id)
        logging.getLogger().addHandler(self.attempt_logs)
        self.spark = SparkHost(self, config, resource_id, self.scratch, self._spark_lost)
        self.registration = Registration(
            self, config, resource_id, instance_id, data_plane, self._slot_report,
            self._fail_tasks, lambda answer: self.spark.take_cluster_settings(
                answer.spark_properties), on_refused)
        self.slot_queue = SlotQueue(self.slots)
        self.metrics = MetricsTicks(self, resource_id, self.tasks.values, self.spark.started,
                                    marks_folder(self.scratch))
        self.updates = StateUpdates(self, self.metrics.publish_ended)
        self.output = OutputRelay(self, self.attempt_logs, self.tasks.values)
        self.spark_work = SparkWorkRelay(self, self.tasks.values)
        self.stuck = StuckTasks(self, self.attempt_logs, self.tasks.get, self._task_done)
        self.job_folders = JobFolders(self, config, stand_ins_of(cluster_id),
                                      lambda: [t.deployment.work_dir
                                               for t in self.tasks.values()])

    def on_start(self) -> None:
        """Main thread: follow the leader and the JobManager's presence, start heartbeats,
        and start the SparkSession once registered unless it is to start lazily.

        A TaskManager restarted after a crash starts Spark lazily: its JVM would take
        seconds of CPU from the tasks being recovered on the same machine, and the
        ResourceManager sends work to TaskManagers whose Spark is up first anyway."""
        service = self.rpc_service
        service.subscribe(topics.LEADER, lambda _t, m: self.run_async(
            self.registration.on_leader, m))
        service.subscribe(topics.presence("jobmanager"), lambda _t, m: self.run_async(
            self.registration.on_jobmanager_presence, m))
        restarted = os.environ.get(RESTARTS_ENV, "0") not in ("", "0")
        self.spark.start_when_registered = self.config["spark.start"] == "eager" \
            and not restarted
        self._heartbeat_round()
        self.metrics.start()

    def on_stop(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        self.slot_queue.stop()
        self.metrics.stop()
        self.spark_work.stop()
        logging.getLogger().removeHandler(self.attempt_logs)
        self.attempt_logs.close()  # the attempts that ended reach the disk

    @property
    def is_registered(self) -> bool:
        return self.registration.is_registered

    def _slot_report(self) -> p.SlotReport:
        return self.slots.report(spark_ready=self.spark.ready)

    def _spark_lost(self, ended: JvmExit) -> None:
        """Main thread: the Spark JVM died; its running attempts fail with that cause."""
        log.error("%s; failing %d running attempt(s) and starting Spark again", ended,
                  len(self.tasks))
        for task in list(self.tasks.values()):
            task.fail(ended.failure(log_excerpt=self.attempt_logs.excerpt(task.attempt_id)))
            self.slot_queue.end_if_queued(task)

    def _check_fencing(self, invocation: Invocation, fenced: bool) -> None:
        """Main thread: a stale leader's cancel, checkpoint message, report request or
        disconnect is refused like its deployments; one without a token counts as epoch 0."""
        message = invocation.message
        if isinstance(message, _LEADER_ORDERS):
            refused = self.registration.fence.admit(invocation.fencing_token or "",
                                                    f"a {type(message).__name__}")
            if refused:
                raise FencingTokenMismatchError(refused)

    # -- liveness ---------------------------------------------------------------------------------

    @handler(p.ResourceManagerHeartbeat, senders=(topics.JOBMANAGER,))
    def heartbeat_from_resource_manager(self, heartbeat: p.ResourceManagerHeartbeat) -> None:
        self.registration.heartbeat_received(heartbeat)

    @handler(p.DisconnectTaskManager, senders=(topics.JOBMANAGER,))
    def disconnect(self, msg: p.DisconnectTaskManager) -> None:
        self.registration.disconnected(msg.reason)

    def _heartbeat_round(self) -> None:
        self.spark.check()
        self.registration.heartbeat_round()
        self.schedule(self.interval, self._heartbeat_round)

    # -- tasks -------------------------------------------------------------------------------------

    @handler(p.SubmitTasks, senders=(topics.JOBMANAGER,))
    def submit_tasks(self, batch: p.SubmitTasks) -> p.TaskOperationResults:
        return p.TaskOperationResults(tuple(self._submit(task) for task in batch.deployments()))

    def _submit(self, task: p.SubmitTask) -> p.TaskOperationResult:
        refused = self.registration.fence.admit(task.fencing_token,
                                                f"the deployment of {task.attempt_id}")
        if refused:
            return p.TaskOperationResult(task.attempt_id, False, refused)
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
        claimed = self.job_folders.fresh(task.work_dir)
        local_max_records = self.config["taskmanager.local-execution.max-records"]
        fetch_timeout = self.config["taskmanager.data.fetch-timeout"]
        backend = StateBackendOptions(StateBackend(self.config["state.backend"]),
                                      self.config["state.backend.memory"])

        def run(spark: Any, job: LoadedJob, deployment: p.SubmitTask, t: Task) -> p.TaskResult:
            with naming_a_full_disk(self.resource_id, claimed or deployment.work_dir):
                kept = claimed or self.job_folders.claim(deployment.work_dir)
                fetch_restore_state(deployment, checkpoint_storage(kept), jobmaster)
                # The job is loaded once per TaskManager, bound to its first task's graph:
                # a job reactive mode rescaled runs on at its deployment's parallelism.
                bound = job if job.graph == deployment.graph \
                    else replace(job, graph=deployment.graph)
                return run_task(spark, bound, with_inputs(deployment, jobmaster), t, kept,
                                local_max_records, backend, fetch_timeout)
        plane = self.data_plane
        services = TaskServices(
            self.spark.session(), self._job(task), self._split_source(task, jobmaster),
            self.attempt_logs,
            report_checkpoint=lambda message: self.run_async(
                self._checkpoint_report, jobmaster, message),
            channels=plane.channels if plane else None,
            broker=plane.broker if plane else None,
            follow_spark=self.config["taskmanager.spark-work.follow"])
        running = Task(task, services, run,
                       lambda t, outcome: self.run_async(self._task_done, t, outcome))
        self.tasks[task.attempt_id] = running
        if self.slot_queue.is_held(task.slot_index):  # it starts when the slot frees
            self.slot_queue.deploy_ahead(running)
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
        self.slot_queue.hold(task)
        self.metrics.began(task)
        self.output.tick_soon()
        self.spark_work.tick_soon()
        self.stuck.watch(task)
        self.updates.report(deployment, p.UpdateTaskExecutionState(
            deployment.job_id, task.attempt_id, ExecutionState.RUNNING))

    @handler(p.CancelTask, senders=(topics.JOBMANAGER,))
    def cancel_task(self, request: p.CancelTask) -> p.TaskOperationResult:
        task = self.tasks.get(request.attempt_id)
        if task is None:
            return p.TaskOperationResult(request.attempt_id, True, "not running here",
                                         known=False)
        task.cancel()
        self.slot_queue.end_if_queued(task)
        return p.TaskOperationResult(request.attempt_id, True)

    @handler(p.RequestExecutionReport, senders=(topics.JOBMANAGER,))
    def request_execution_report(self, request: p.RequestExecutionReport
                                 ) -> p.ExecutionReport:
        """The JobMaster's half of deployment reconciliation: what of its job runs here."""
        return p.ExecutionReport(
            self.resource_id,
            running=tuple(a for a, t in self.tasks.items()
                          if t.deployment.job_id == request.job_id),
            reporting=self.updates.reporting(request.job_id))

    def _job(self, task: p.SubmitTask) -> Future[LoadedJob]:
        """One download and one load of a job's artifact per TaskManager, on a worker."""
        future = self._jobs.get(task.job_id)
        if future is None or (future.done() and future.exception() is not None):
            leader = self.registration.leader
            assert leader is not None
            dispatcher = self.rpc_service.gateway(DispatcherGateway, leader.dispatcher,
                                                  leader.fencing_token)
            future = self.run_in_worker(load_artifact, dispatcher, task, self.scratch / "jobs",
                                        name="artifact")
            self._jobs[task.job_id] = future
        return future

    def _split_source(self, task: p.SubmitTask, jobmaster: JobMasterGateway) -> SplitSource:
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
        following = self.slot_queue.release(task)
        self.output.last_of(task)
        self.spark_work.last_of(task)
        self.metrics.ended(task, outcome)
        self.updates.report(task.deployment, p.UpdateTaskExecutionState(
            task.deployment.job_id, task.attempt_id, outcome.state, outcome.failure,
            outcome.result))
        if following is not None:
            self._begin(following)

    def _fail_tasks(self, why: str) -> None:
        """Without its JobMaster a task's result has nowhere to go: cancel them all and free
        the slots; the recovered JobMaster schedules the work again."""
        if self.tasks:
            log.warning("cancelling %d running task(s): %s", len(self.tasks), why)
        for task in list(self.tasks.values()):
            task.cancel()
            self.slot_queue.end_if_queued(task)
