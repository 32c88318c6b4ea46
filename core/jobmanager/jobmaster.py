"""The JobMaster: runs one job. It owns the job's ExecutionGraph and scheduler, and turns
what the ResourceManager and the TaskManagers tell it into the scheduler's events, and
the scheduler's instructions into calls on the job's collaborators: its slots
(``jobslots``), deployments (``deployer``), reconciliation rounds and cancels
(``reconciliation``), checkpoints (``checkpoints``; their messages in
``checkpointhandlers``), events, snapshots and progress (``jobevents``) and result
(``jobresult``). It serves input splits and relays output.

The scheduling logic is the pure state machine in ``clusterdeck.core.executiongraph``; this
endpoint only carries its instructions out, each by the one handler of its type.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from functools import singledispatchmethod
from pathlib import Path
from typing import Any

from clusterdeck.core.checkpointing.stats import stats_of
from clusterdeck.core.config.settings import Config
from clusterdeck.core.executiongraph import instructions as ins
from clusterdeck.core.executiongraph.causes import CauseLinker
from clusterdeck.core.executiongraph.execution import Execution
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.executiongraph.recovery import FinishedSubtask
from clusterdeck.core.executiongraph.scheduler import Scheduler
from clusterdeck.core.jobmanager.blocklist import Blocklist, vouched
from clusterdeck.core.jobmanager.checkpointhandlers import CheckpointHandlers
from clusterdeck.core.jobmanager.checkpoints import JobCheckpoints, tasks_to_checkpoint
from clusterdeck.core.jobmanager.datapeers import DataPeers
from clusterdeck.core.jobmanager.deployer import Deployer
from clusterdeck.core.jobmanager.finalupdates import FinalUpdates
from clusterdeck.core.jobmanager.jobevents import (
    JobEvents,
    JobSnapshots,
    ProgressReports,
    execution_event,
    relayed_output,
)
from clusterdeck.core.jobmanager.jobresult import failed_outside_graph, failure_cause, job_result
from clusterdeck.core.jobmanager.jobslots import JobSlots
from clusterdeck.core.jobmanager.jobstart import (
    fair_shares,
    initialized_sinks,
    job_checkpoints,
    job_scheduler,
    planned_splits,
    restore_finished,
)
from clusterdeck.core.jobmanager.jobstore import JobRecord, ProgressLog
from clusterdeck.core.jobmanager.reconciliation import ReconciliationRounds, live_executions
from clusterdeck.core.jobmanager.sparkwork import ScriptSparkWork
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.causes import CarriedBy
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.gateways import ResourceManagerGateway, TaskExecutorGateway
from clusterdeck.core.protocol.ids import subtask_id
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot, JobProgress
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.protocol.workdir import whole_partitions
from clusterdeck.core.rpc import RefusedMessageError, SenderMismatchError, handler

log = logging.getLogger(__name__)


class UnknownInstruction(TypeError):
    """The scheduler emitted an instruction this JobMaster has no handler for: the job
    fails with it rather than go on with the instruction lost."""


def endpoint_id_of(job_id: str) -> str:
    return f"jobmaster.{job_id}"


class JobMaster(CheckpointHandlers):
    def __init__(self, config: Config, record: JobRecord,
                 resource_manager: ResourceManagerGateway, fencing_token: str, work_dir: Path,
                 progress: ProgressLog, on_status: Callable[[JobStatus, int, int], None],
                 on_terminal: Callable[[p.JobResult], None],
                 savepoint_root: Path | None = None) -> None:
        super().__init__(endpoint_id_of(record.job_id), fencing_token)
        self.savepoint_root = savepoint_root  # where a streaming job's savepoints go
        self.config = config
        self.record = record
        self.job_id = record.job_id
        self.work_dir = work_dir
        self._on_status = on_status
        self._on_terminal = on_terminal
        self.progress_log = progress
        self.graph = ExecutionGraph(record.graph, record.job_id, epoch=record.epoch)
        self.scheduler: Scheduler | None = None
        self._ended = False
        self._failed_outside_graph = False  # the graph never ran, or its JobMaster failed
        self._suspended: Callable[[], None] | None = None  # stopping to rescale (suspend)
        self._split_answers: dict[str, tuple[int, p.NextInputSplit]] = {}
        self._split_shares: dict[str, int] = {}  # source vertex id -> bytes; set at start
        self._data_peers = DataPeers(str(work_dir))
        self.checkpoints: JobCheckpoints | None = None  # a streaming job's
        self.causes = CauseLinker(self._host_of, "jobmanager",
                                  lambda line: log.info("job %s: %s", self.job_id, line))
        self.blocklist = Blocklist(config["jobmanager.blocklist.timeout"], self.schedule,
                                   self.causes.taskmanager_blocked,
                                   lambda: self.slots.blocklist_changed())
        self.slots = JobSlots(self.job_id, self.endpoint_id, resource_manager, self.run_async,
                              self.blocklist)
        self.reconciliation = ReconciliationRounds(
            self.job_id, self.graph, self.slots, self, self._executor, config,
            self._running, self._task_state_changed, self._slots_overdue)
        self.deployer = Deployer(
            record, work_dir, self.endpoint_id, fencing_token, self.graph, self.slots,
            self._data_peers, self, self._executor, lambda: self.checkpoints,
            self.reconciliation.confirmed, self._deployment_failed,
            lambda vertex_id: self._split_shares.get(vertex_id, 0))
        self._final_updates = FinalUpdates(self.graph, self._data_peers, work_dir, self,
                                           self.reconciliation, self._apply_update)
        self.events = JobEvents(self.job_id, self._publish, self.run_async)
        self.snapshots = JobSnapshots(self.job_id, sum(1 for _ in self.graph.subtasks()),
                                      self, self._snapshot, self._publish_retained)
        self._progress = ProgressReports(self, self._report_progress)
        self.spark_work = ScriptSparkWork()

    # -- lifecycle --------------------------------------------------------------------------

    def on_start(self) -> None:
        """Main thread: plan the splits, subscribe to TaskManager losses, start the job."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.rpc_service.subscribe(topics.CLUSTER_EVENTS, self._on_cluster_event)
        try:
            initialized_sinks(self.record)
            if self.record.graph.kind is JobKind.STREAMING:
                self.checkpoints = job_checkpoints(
                    self.record, self.work_dir, self.savepoint_root, self,
                    lambda: tasks_to_checkpoint(self.graph), self._tell_attempt,
                    self._fail_for_checkpoints)
            splits = planned_splits(self.record, self.config)
            self._split_shares = fair_shares(self.record, splits)
            scheduler = job_scheduler(self.graph, self.record, self.config, splits,
                                      self.blocklist)
        except (OSError, ValueError) as error:  # ConfigError included: bad job settings
            self._fail_before_start(error)
            return
        self.scheduler = scheduler
        if self.record.epoch:
            restore_finished(scheduler, self.record, self.progress_log)
        self._execute(scheduler.start(time.time()))
        if self.checkpoints is not None:
            self.checkpoints.start()
        # Not now: a large job's first snapshot took longer to build than its first
        # deployments; its events tell observers everything meanwhile.
        self.snapshots.schedule()
        self.reconciliation.round()

    def on_stop(self) -> None:
        """Main thread: let go of what this job held in the process's shared transport."""
        self.rpc_service.unsubscribe(topics.CLUSTER_EVENTS, self._on_cluster_event)
        self.rpc_service.forget_retained(topics.job_state(self.job_id))

    def _fail_before_start(self, error: Exception) -> None:
        log.warning("job %s cannot start: %s", self.job_id, error)
        self._fail_outside_graph(failure_cause(type(error).__name__, str(error)), (0, 0))

    def on_unhandled_error(self, error: Exception, context: str) -> None:
        """Main thread: an error no asker hears of would leave the job waiting for ever;
        the job fails with it instead (Flink's JobMaster fails its job on an error of
        its own), after a cancel to every attempt still on a TaskManager."""
        super().on_unhandled_error(error, context)
        if self._ended:
            return
        for execution in live_executions(self.graph):
            if self.slots.knows(execution.taskmanager_id):
                self._executor(execution.taskmanager_id).cancel_task(
                    p.CancelTask(self.job_id, execution.attempt_id))
        self._fail_outside_graph(failure_cause(
            type(error).__name__, f"the JobMaster failed in {context}: {error}",
            "".join(traceback.format_exception(error))), self.progress)

    def _fail_outside_graph(self, root_cause: dict[str, Any],
                            progress: tuple[int, int]) -> None:
        self.events.status_changed(self.graph.status, JobStatus.FAILED, time.time())
        self._failed_outside_graph = True
        self._end(failed_outside_graph(self.job_id, self.record.graph.name, root_cause,
                                       progress))

    @property
    def progress(self) -> tuple[int, int]:
        """(finished, total) subtasks, or a script's Spark stages (done, known) while it
        runs; main thread only (others get it via on_status)."""
        subtasks = self.graph.progress()
        return subtasks if self.graph.status.is_terminal else self.spark_work.progress(subtasks)

    def cancel(self) -> None:
        if self._running():
            self._execute(self.scheduler.cancel(time.time()))

    def suspend(self, suspended: Callable[[], None]) -> None:
        """Main thread: stop every task without ending the job (reactive mode restarts
        it at another parallelism, core/jobmanager/reactive.py): a cancel, whose end calls
        ``suspended`` instead of ending the job. Nothing is committed meanwhile: the
        checkpoints stop first, so the job goes on from its latest completed one."""
        if not self._running() or self._suspended is not None:
            return
        self._suspended = suspended
        if self.checkpoints is not None:
            self.checkpoints.stop("the job rescales")
        self._execute(self.scheduler.cancel(time.time()))

    def rescaled(self, rescales: tuple[tuple[str, int, float], ...]) -> None:
        """Main thread: this run of the job is reactive mode's or the autoscaler's restart
        at another parallelism; ``rescales``, (summary, checkpoint, when) of the latest
        ones, this one last, begin its chain of causes."""
        for number, (summary, checkpoint_id, at) in enumerate(rescales, 1):
            self.causes.rescaled(f"{summary} (from checkpoint {checkpoint_id})"
                                 if checkpoint_id else f"{summary} (no checkpoint yet: "
                                 f"from the start)", checkpoint_id, at,
                                 earlier=number < len(rescales))
        self.snapshots.schedule()

    def _running(self) -> bool:
        """The scheduler runs the job, and it has not ended."""
        return self.scheduler is not None and not self._ended

    # -- from the ResourceManager and TaskExecutors ----------------------------------------

    @handler(p.OfferSlots, senders=(topics.JOBMANAGER,))
    def offer_slots(self, batch: p.OfferSlots) -> None:
        for offer in batch.offers:
            self._offered(offer)

    def _offered(self, offer: p.OfferSlot) -> None:
        slot = self.slots.offered(offer)
        if slot is None:
            return
        self._data_peers.offered(offer)
        if not self._running():
            self.slots.free(slot)
            return
        self._execute(self.scheduler.slot_offered(offer.resource_id, offer.slot_index,
                                                  time.time()))

    @handler(p.UpdateTaskExecutionStates, senders=(topics.TASKMANAGERS,))
    def update_task_execution_states(self, batch: p.UpdateTaskExecutionStates
                                     ) -> p.UpdatesAcknowledged:
        """A TaskManager's updates of one turn, applied in order, one acknowledgement
        each. Only the TaskManager an attempt runs on may speak for it: a batch naming
        another's attempt is refused whole."""
        for update in batch.updates:
            self._check_attempt_host(update.attempt_id)
        return p.UpdatesAcknowledged(tuple(self._update(u) for u in batch.updates))

    def _update(self, update: p.UpdateTaskExecutionState) -> p.UpdateAcknowledged:
        if self.scheduler is None:
            return p.UpdateAcknowledged(update.attempt_id, False, "the job is not running")
        return self._final_updates.take(update)

    def _apply_update(self, update: p.UpdateTaskExecutionState,
                      fetch_error: BaseException | None) -> list[str]:
        """The update's transition; a FINISHED whose files could not be fetched is a
        failure of the attempt instead, so failover runs it again."""
        if not self._running():
            return ["the job is not running"]
        state, failure = update.state, vouched(update.failure, self.graph, update.attempt_id)
        host = self._host_of(update.attempt_id)
        carried_by = CarriedBy("UpdateTaskExecutionStates", host or "?", time.time())
        if fetch_error is not None:  # blocked for the job if its host did not answer
            state, failure = ExecutionState.FAILED, TaskFailure(
                "ResultNotFetched", f"the task finished, but what it left for the client "
                f"could not be fetched: {fetch_error}", unreachable=(host,) if host and getattr(
                    fetch_error, "unanswered", False) else ())
        out = self.scheduler.task_state_changed(update.attempt_id, state, time.time(),
                                                failure=failure, result=update.result)
        self._execute(out, carried_by)
        return [i.reason for i in out if isinstance(i, ins.Rejected)]

    def _check_attempt_host(self, attempt_id: str, known: bool = False) -> None:
        """Only the TaskManager an attempt was deployed to speaks for it (when the
        transport vouches for the sender: ``self.sender``); ``known``: and only of an
        attempt this job has."""
        execution = self.graph.execution(attempt_id)
        if execution is None and known:
            raise RefusedMessageError(f"{attempt_id} is no attempt of job {self.job_id}")
        host = execution.taskmanager_id if execution is not None else None
        if self.sender is not None and host is not None and host != self.sender:
            raise SenderMismatchError(f"attempt {attempt_id} runs on {host}, not on "
                                      f"{self.sender}")

    @handler(p.TaskOutput, senders=(topics.TASKMANAGERS,))
    def task_output(self, output: p.TaskOutput) -> None:
        """Pass what a running script printed on to its submitter, if it is one of this
        job's attempts, from the TaskManager running it, into one of its output files."""
        self._check_attempt_host(output.attempt_id, known=True)
        self.rpc_service.publish(topics.job_output(self.job_id),
                                 relayed_output(self.job_id, output, self.work_dir))

    @handler(p.SparkWorkReport, senders=(topics.TASKMANAGERS,))
    def spark_work_report(self, report: p.SparkWorkReport) -> None:
        """A script attempt's Spark jobs, for the job's snapshot and progress. One that is
        refused is logged, not failed: it costs the job its Spark view, not its run."""
        self._check_attempt_host(report.work.attempt_id, known=True)
        if self.spark_work.reported(report.work):
            self.snapshots.schedule()
            self._progress.soon()

    @handler(p.RequestNextInputSplit, senders=(topics.TASKMANAGERS,))
    def request_next_input_split(self, request: p.RequestNextInputSplit) -> p.NextInputSplit:
        self._check_attempt_host(request.attempt_id)
        if self.scheduler is None:
            raise RuntimeError("the job is not running")
        previous = self._split_answers.get(request.attempt_id)
        if previous is not None and previous[0] == request.sequence:
            return previous[1]  # the answer was lost on the way: the same split again
        out = self.scheduler.request_split(request.attempt_id, request.host)
        for instruction in out:
            if isinstance(instruction, ins.Rejected):
                raise ValueError(instruction.reason)
        self._execute(out)
        answer = p.NextInputSplit(next(i.split for i in out
                                       if isinstance(i, ins.AssignSplit)))
        self._split_answers[request.attempt_id] = (request.sequence, answer)
        return answer

    @handler(p.RequestInputPartitions, senders=(topics.TASKMANAGERS,))
    def request_input_partitions(self, request: p.RequestInputPartitions
                                 ) -> p.InputPartitions:
        self._check_attempt_host(request.attempt_id)
        return self.deployer.input_partitions(request, self.config["rpc.framesize"])

    def _on_cluster_event(self, _topic: str, event: Any) -> None:
        if isinstance(event, p.TaskManagerLost):
            self.run_async(self._taskmanager_lost, event.resource_id, event.cause, event.at)

    def _taskmanager_lost(self, resource_id: str, cause: str, at: float = 0.0) -> None:
        """``at``: when the ResourceManager told of it (its ``TaskManagerLost``)."""
        self.slots.taskmanager_lost(resource_id)
        if self._running():
            carried_by = CarriedBy("TaskManagerLost", "resourcemanager", at or time.time())
            self.causes.taskmanager_lost(resource_id, cause, carried_by)
            batch = self.record.graph.kind is not JobKind.STREAMING  # files, not channels
            self._execute(self.scheduler.taskmanager_lost(
                resource_id, cause, time.time(),
                partitions_kept=self._partitions_here if batch else None), carried_by)

    def _host_of(self, attempt_id: str) -> str | None:
        execution = self.graph.execution(attempt_id)
        return execution.taskmanager_id if execution is not None else None

    def _partitions_here(self, finished: Execution) -> bool:
        """Whether a finished attempt's result partitions outlive its lost TaskManager:
        only when all of them are whole on this machine's disk (it shared the work dir;
        a consumer here may have fetched a few of them). Elsewhere its data service was
        the only way to them, so its producer runs again now, rather than after its
        consumers fail to fetch them. A listing of its folder, on the main thread."""
        written = sum(edge.partitions for edge in self.graph.output_partitions(
            finished.vertex_id))
        return whole_partitions(self.work_dir, finished.attempt_id) >= written

    def _executor(self, taskmanager_id: str) -> TaskExecutorGateway:
        """Its messages carry this leader's token, whose epoch the TaskExecutor checks."""
        return self.rpc_service.gateway(TaskExecutorGateway,
                                        self.slots.executor_id(taskmanager_id),
                                        self.fencing_token)

    # -- events into the scheduler, from the collaborators -------------------------------------

    def _task_state_changed(self, attempt_id: str, state: ExecutionState,
                            failure: TaskFailure | None) -> None:
        if self._running():
            self._execute(self.scheduler.task_state_changed(attempt_id, state, time.time(),
                                                            failure=failure))

    def _deployment_failed(self, attempt_id: str, reason: str) -> None:
        self._task_state_changed(attempt_id, ExecutionState.FAILED,
                                 TaskFailure("DeploymentFailed", f"could not deploy: {reason}"))

    def _slots_overdue(self) -> None:
        if self._running():
            self._execute(self.scheduler.slots_overdue(
                time.time(), self.config["jobmanager.slot-request-timeout"]))

    def _restart_due(self) -> None:
        if self._running():
            self._execute(self.scheduler.restart_due(time.time()))

    # -- carrying out the scheduler's instructions -------------------------------------------

    def _execute(self, instructions: list[ins.Instruction],
                 carried_by: CarriedBy | None = None) -> None:
        """Each instruction by the handler of its type, after the chain of causes took
        them in (``carried_by``: the message that brought the event, None for the
        JobMaster's own). One of a type without a handler fails the job: raised, it would
        reach only the asker when an ask's handler (a TaskManager's update) carried it
        out, and the job would go on without it."""
        self.causes.observe(instructions, self.graph.failures, carried_by)
        try:
            for instruction in instructions:
                self._carry_out(instruction)
        except UnknownInstruction as error:
            self.on_unhandled_error(error, "carrying out the scheduler's instructions")
            return
        if instructions:
            self.snapshots.schedule()

    @singledispatchmethod
    def _carry_out(self, instruction: object) -> None:
        raise UnknownInstruction(f"no handler for the scheduler's instruction {instruction!r}")

    @_carry_out.register
    def _job_status_changed(self, change: ins.JobStatusChanged) -> None:
        if self._suspended is not None:  # neither CANCELLING nor CANCELED: it goes on
            return
        self.events.status_changed(change.old, change.new, change.timestamp)
        self._on_status(change.new, *self.progress)

    @_carry_out.register
    def _execution_state_changed(self, change: ins.ExecutionStateChanged) -> None:
        execution = self.graph.execution(change.attempt_id)
        slot = execution.slot if execution else None
        self.events.execution_moved(execution_event(self.job_id, change, slot))
        # after the chain of causes took it in; once blocked, what waits to start there moves
        if self.blocklist.failed(change.failure) and (scheduler := self.scheduler):
            self.run_async(lambda: self._execute(scheduler.leave_avoided(time.time())))
        if change.new in (ExecutionState.FAILED, ExecutionState.CANCELING) \
                and self.checkpoints is not None:
            why = f"{change.attempt_id} is {change.new}"
            self.causes.checkpoints_aborted(
                self.checkpoints.failing_over(why), change.attempt_id, why, change.timestamp,
                CarriedBy("NotifyCheckpointAborted", self.endpoint_id, change.timestamp))
        if change.new.is_terminal:
            self.deployer.ended(change.attempt_id)
            self.reconciliation.ended(change.attempt_id)
        if change.new is ExecutionState.FINISHED and execution is not None:
            if self.checkpoints is not None:
                self.checkpoints.task_finished(execution.subtask_id, execution.attempt_id)
            self.progress_log.append(FinishedSubtask(
                execution.vertex_id, execution.subtask, execution.attempt_id, execution.attempt,
                execution.result, tuple(s.split_id for s in execution.input_splits)))
            self._progress.soon()

    @_carry_out.register
    def _new_attempt(self, _new: ins.NewAttempt) -> None:
        """Nothing to send: observers meet the attempt in its first move (CREATED to
        SCHEDULED, an ExecutionStateChanged with its id and number) and in the snapshot
        scheduled after these instructions; what the attempt it replaces held here was let
        go when that one ended."""

    @_carry_out.register
    def _request_slot(self, request: ins.AllocateSlot) -> None:
        self.slots.request(request.attempt_id)

    @_carry_out.register
    def _withdraw_slot_request(self, withdraw: ins.WithdrawSlotRequest) -> None:
        self.slots.withdraw(withdraw.attempt_id)

    @_carry_out.register
    def _release_slot(self, release: ins.ReleaseSlot) -> None:
        self.slots.free(release.slot)

    @_carry_out.register
    def _deploy(self, deploy: ins.DeployTask) -> None:
        self.deployer.deploy(deploy)
        if deploy.attempt and self.checkpoints is not None:  # a restart: from which state
            checkpoint_id, _ = self.checkpoints.restore_of(subtask_id(deploy.vertex_id,
                                                                      deploy.subtask))
            now = time.time()
            self.causes.restored(deploy.vertex_id, deploy.subtask, checkpoint_id, now,
                                 CarriedBy("SubmitTasks", self.endpoint_id, now))

    @_carry_out.register
    def _cancel_task(self, cancel: ins.CancelAttempt) -> None:
        """Deployments still queued go first: a cancel must never overtake the deployment
        it cancels."""
        self.deployer.send()
        self.reconciliation.cancel(cancel)

    @_carry_out.register
    def _consumers_schedulable(self, _schedulable: ins.ScheduleOrUpdateConsumers) -> None:
        """Nothing to send: the scheduler follows this with the consumers' own AllocateSlot
        or DeployTask, and the exchange is blocking, so no consumer already runs whose
        inputs would need updating (Flink's updatePartitionInfo)."""

    @_carry_out.register
    def _split_assigned(self, _assigned: ins.AssignSplit) -> None:
        """Nothing to send: the split is the answer to the request that asked for it
        (``request_next_input_split`` reads it from the instructions)."""

    @_carry_out.register
    def _schedule_restart(self, restart: ins.ScheduleRestart) -> None:
        self.schedule(restart.delay, self._restart_due)

    @_carry_out.register
    def _job_finished(self, finished: ins.JobFinished) -> None:
        results = [r for r in finished.results.values() if isinstance(r, p.TaskResult)]
        self._end(self._result(JobStatus.FINISHED, finished.duration, results))

    @_carry_out.register
    def _job_failed(self, failed: ins.JobFailed) -> None:
        self._end(self._result(JobStatus.FAILED, failed.duration, [], root_cause=failure_cause(
            self.causes.root_failure() or failed.root_cause)))

    @_carry_out.register
    def _job_canceled(self, canceled: ins.JobCanceled) -> None:
        if self._suspended is not None:
            self._ended = True
            self.progress_log.close()
            self.events.flush()
            self.slots.release_all()
            self._suspended()
            return
        self._end(self._result(JobStatus.CANCELED, canceled.duration, []))

    @_carry_out.register
    def _rejected(self, rejected: ins.Rejected) -> None:
        """Nothing changed; whoever asked reads the reason from the instructions (an
        update's acknowledgement, a split request's error)."""
        log.debug("job %s: the scheduler refused an event: %s", self.job_id, rejected.reason)

    # -- the end -----------------------------------------------------------------------------

    def _result(self, status: JobStatus, duration: float, results: list[p.TaskResult],
                root_cause: dict[str, Any] | None = None) -> p.JobResult:
        return replace(job_result(self.graph, self.record.graph.name, status, duration,
                                  results, self.work_dir, root_cause),
                       spark=self.spark_work.snapshot()[-1:])

    def _end(self, result: p.JobResult) -> None:
        if self._ended:
            return
        self._ended = True
        if self.checkpoints is not None:
            self.checkpoints.stop(f"the job ended {result.status}")
        try:
            self.progress_log.close()
            self.events.flush()
            self.slots.release_all()
            self.snapshots.publish()
        finally:  # whatever else fails, the Dispatcher and the client learn the end
            self._on_terminal(result)

    # -- observers -----------------------------------------------------------------------------

    def _snapshot(self) -> JobGraphSnapshot:
        snapshot = replace(self.graph.snapshot(), hosts=dict(self.slots.hosts),
                           checkpoints=None if self.checkpoints is None
                           else stats_of(self.checkpoints.coordinator, self.deployer.restored),
                           spark=self.spark_work.snapshot(), causes=self.causes.chain())
        if (root_cause := self.causes.root_failure()) is not None:  # the real one
            snapshot = replace(snapshot, root_cause=root_cause)
        stages = self.spark_work.stage_progress()
        if stages is not None and not snapshot.status.is_terminal:  # as self.progress counts
            snapshot = replace(snapshot, progress=JobProgress(*stages, spark_stages=True))
        if self._failed_outside_graph:  # the graph never ran, or its JobMaster failed
            snapshot = replace(snapshot, status=JobStatus.FAILED)
        elif self._suspended is not None:  # stopping to rescale: it goes on
            snapshot = replace(snapshot, status=JobStatus.RESTARTING)
        return snapshot

    def _publish(self, topic: str, message: Any) -> None:
        self.rpc_service.publish(topic, message)

    def _publish_retained(self, topic: str, message: Any) -> None:
        self.rpc_service.publish(topic, message, retained=True)

    def _report_progress(self) -> None:
        if not self._ended:
            self._on_status(self.graph.status, *self.progress)
