"""The JobMaster: runs one job. It owns the job's ExecutionGraph and scheduler, asks the
ResourceManager for slots, deploys tasks to TaskExecutors, serves input splits and turns
what the TaskManagers report into the job's progress, events and result.

The scheduling logic is the pure state machine in ``clusterdeck.core.executiongraph``; this endpoint
only carries its instructions out over the transport.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from clusterdeck.core.checkpointing import CheckpointStorage, CheckpointStorageError, Savepoints
from clusterdeck.core.checkpointing.stats import stats_of
from clusterdeck.core.config.settings import Config
from clusterdeck.core.executiongraph import instructions as ins
from clusterdeck.core.executiongraph.execution import Execution, SlotRef, subtask_id
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.executiongraph.recovery import FinishedSubtask
from clusterdeck.core.executiongraph.restart import (
    ExponentialDelay,
    FailureRate,
    FixedDelay,
    NoRestart,
    RestartStrategy,
)
from clusterdeck.core.executiongraph.scheduler import Scheduler
from clusterdeck.core.executiongraph.splitassigner import InputSplitAssigner
from clusterdeck.core.jobapi.inputsplits import plan_splits
from clusterdeck.core.jobapi.sinkfolders import initialize_sinks
from clusterdeck.core.jobmanager.checkpoints import (
    JobCheckpoints,
    SavepointFailed,
    chain,
    tasks_to_checkpoint,
)
from clusterdeck.core.jobmanager.datapeers import DataPeers, NoChannelServer, fetch_unseen
from clusterdeck.core.jobmanager.jobevents import JobEvents
from clusterdeck.core.jobmanager.jobstore import JobRecord, ProgressLog
from clusterdeck.core.jobmanager.reconciliation import DeploymentReconciler
from clusterdeck.core.jobmanager.reductions import reductions
from clusterdeck.core.jobmanager.resultfiles import chunk_size, read_chunk
from clusterdeck.core.jobmanager.results import fitted
from clusterdeck.core.jobmanager.slotrequests import SlotRequestQueue
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.checkpointstats import RestoredCheckpointStats
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.gateways import ResourceManagerGateway, TaskExecutorGateway
from clusterdeck.core.protocol.jobgraph import InputSplit, JobKind, is_url
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.protocol.wiring import EdgeInput, StreamChannel
from clusterdeck.core.rpc import (
    AskTimeoutError,
    FencedRpcEndpoint,
    FrameTooLargeError,
    SenderMismatchError,
    handler,
)
from clusterdeck.core.rpc.outbox import Outbox, send_in_halves

log = logging.getLogger(__name__)
SNAPSHOT_INTERVAL = 0.1  # at most ten snapshots a second, however busy the job
PROGRESS_INTERVAL = 0.25  # seconds between two progress reports to the Dispatcher
SUBTASKS_PER_SNAPSHOT_SECOND = 2000  # a 1,000-subtask job: two snapshots a second
DEPLOY_TRIES = 3
MAX_HISTORY = 20  # failures kept in a JobResult; the snapshot has them all
DEPLOYMENTS_PER_MESSAGE = 64  # a SubmitTasks' most tasks; a frame may hold fewer
SLOT_MESSAGES_PER_BATCH = 256  # requests and frees in one SlotRequests
SLOT_REQUESTS_OUT = 128  # slot requests at the ResourceManager at once; the rest wait here
RESOURCE_MANAGER = "resourcemanager"
PARTITION_REF_BYTES = 512  # generous encoded size of one ResultPartitionRef: pages fit


def _files_the_client_reads(update: p.UpdateTaskExecutionState) -> tuple[str, ...]:
    """The files of a finished task the JobManager must have before the task counts."""
    result = update.result
    if update.state is not ExecutionState.FINISHED or result is None:
        return ()
    return tuple(path for path in (result.collected_path, result.stdout_path,
                                   result.stderr_path) if path)


def _located(splits: list[InputSplit]) -> list[InputSplit]:
    """File splits are on this host's disk: the assigner gives them to TaskManagers on
    this host only (input on a shared mount is named by a URL, file:///..., and goes to
    anyone)."""
    host = socket.gethostname()
    return [replace(s, hosts=(host,)) if s.path and not s.hosts and not is_url(s.path)
            else s for s in splits]


def _trimmed(failure: dict[str, Any]) -> dict[str, Any]:
    """A failure record small enough for a message: long tracebacks keep their end."""
    return {**failure, "traceback": str(failure.get("traceback", ""))[-6000:]}


def endpoint_id_of(job_id: str) -> str:
    return f"jobmaster.{job_id}"


def restart_strategy(settings: Mapping[str, Any]) -> RestartStrategy:
    """The strategy named by ``restart-strategy.type`` with its ``restart-strategy.*``
    settings (a Config, or a Config with a job's own overrides)."""
    kind = settings["restart-strategy.type"]
    key = f"restart-strategy.{kind}."
    if kind == "fixed-delay":
        return FixedDelay(settings[key + "attempts"], settings[key + "delay"])
    if kind == "failure-rate":
        return FailureRate(settings[key + "max-failures"], settings[key + "interval"],
                           settings[key + "delay"])
    if kind == "exponential-delay":
        return ExponentialDelay(settings[key + "initial"], settings[key + "max"],
                                settings[key + "multiplier"], settings[key + "jitter"])
    return NoRestart()


class JobMaster(FencedRpcEndpoint):
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
        self.resource_manager = resource_manager
        self.work_dir = work_dir
        self._on_status = on_status
        self._on_terminal = on_terminal
        self.progress_log = progress
        self.graph = ExecutionGraph(record.graph, record.job_id, epoch=record.epoch)
        self._subtasks = sum(1 for _ in self.graph.subtasks())
        self._progress_due = False
        self.scheduler: Scheduler | None = None
        self._allocations: dict[SlotRef, str] = {}
        # Slot requests, a bounded number out at once; allocations freed at the
        # ResourceManager since, so that an offer crossing the free on its way is not taken.
        self._slot_requests = SlotRequestQueue(SLOT_REQUESTS_OUT)
        self._withdrawn: set[str] = set()
        self._executors: dict[str, str] = {}  # TaskManager id -> TaskExecutor endpoint
        self._hosts: dict[str, str] = {}
        self._data_peers = DataPeers(str(work_dir))
        self._snapshot_due = False
        self._snapshot_level = 0  # the first of reductions() that fitted
        self._ended = False
        self._split_answers: dict[str, tuple[int, p.NextInputSplit]] = {}
        self._failed_outside_graph = False
        self._offloaded_inputs: dict[str, tuple[EdgeInput, ...]] = {}
        self._confirmed: set[str] = set()  # deployments their TaskExecutor acknowledged
        # Final updates acknowledged but applied once their files are fetched: the
        # TaskExecutor no longer lists them, and reconciliation must not take them as lost.
        self._fetching: set[str] = set()
        self._reconciler = DeploymentReconciler()
        self._reports_pending: set[str] = set()  # TaskManagers asked, not yet answered
        self._deployments: Outbox[str, p.SubmitTask] = Outbox(DEPLOYMENTS_PER_MESSAGE)
        self._slot_messages: Outbox[str, p.RequestSlot | p.FreeSlot] = \
            Outbox(SLOT_MESSAGES_PER_BATCH)
        self.events = JobEvents(self.job_id, self._publish, self.run_async)
        self.checkpoints: JobCheckpoints | None = None  # a streaming job's
        self._restored: RestoredCheckpointStats | None = None  # last deployed from, when

    # -- lifecycle --------------------------------------------------------------------------

    def on_start(self) -> None:
        """Main thread: plan the splits, subscribe to TaskManager losses, start the job."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.rpc_service.subscribe(topics.CLUSTER_EVENTS, self._on_cluster_event)
        try:
            streaming = self.record.graph.kind is JobKind.STREAMING
            if self.record.graph.kind in (JobKind.DATAFLOW, JobKind.STREAMING) \
                    and self.record.epoch == 0:
                # a recovered job keeps what it wrote; one started from a savepoint what
                # the job before it committed
                initialize_sinks(self.record.graph,
                                 keep_output=self.record.graph.savepoint is not None)
            if streaming:
                self.checkpoints = self._job_checkpoints()
            splits = InputSplitAssigner({
                vertex.id: _located(plan_splits(vertex, self.config["job.split-size"]))
                for vertex in self.record.graph.vertices
                if vertex.is_source and self.record.graph.kind is JobKind.DATAFLOW})
        except (OSError, ValueError) as error:
            self._fail_before_start(error)
            return
        try:
            settings = self.config.with_overrides(self.record.restart_strategy or {})
            self.scheduler = Scheduler(
                self.graph, restart_strategy(settings), splits,
                failover=settings["jobmanager.execution.failover-strategy"],
                # a streaming task never ends: nothing may wait behind it in its slot
                deploy_ahead=settings["jobmanager.scheduler.deploy-ahead"] and not streaming,
                pipelined=streaming)
        except ValueError as error:  # ConfigError included: a job's own bad settings
            self._fail_before_start(error)
            return
        self._restore()
        self._execute(self.scheduler.start(time.time()))
        if self.checkpoints is not None:
            self.checkpoints.start()
        # Not now: a large job's first snapshot took longer to build than its first
        # deployments; its events tell observers everything meanwhile.
        self._schedule_snapshot()
        self._reconcile_round()

    def _restore(self) -> None:
        """Put back the subtasks an earlier JobManager run had finished."""
        if self.record.epoch == 0 or self.scheduler is None:
            return
        finished = self.progress_log.read()
        try:
            self.scheduler.restore_finished(finished)
        except ValueError as error:
            log.warning("job %s: cannot reuse the earlier run's results (%s); running it "
                        "all again", self.job_id, error)
            return
        log.info("job %s recovered in epoch %d: %d subtasks already finished", self.job_id,
                 self.record.epoch, len(finished))

    def _job_checkpoints(self) -> JobCheckpoints:
        """A streaming job's checkpoints, under its work dir, going on from those an
        earlier JobManager run completed. Raises ValueError for options that make no
        sense, OSError when the folder cannot be read."""
        options = self.record.graph.checkpointing
        if options is None:
            raise ValueError("a streaming job needs its checkpointing options")
        storage = CheckpointStorage(self.work_dir / "checkpoints")
        savepoints = Savepoints(self.savepoint_root) if self.savepoint_root else None
        restore = self.record.graph.savepoint
        if restore is not None and self.record.epoch == 0:
            if savepoints is None:
                raise ValueError("this JobManager has no savepoint folder to restore from")
            try:  # the job's first checkpoint: a copy of the savepoint's
                savepoints.adopt(restore, self.record.graph, self.job_id, storage)
            except CheckpointStorageError as error:
                raise ValueError(str(error)) from None
        recovered, problems = storage.completed(self.job_id) \
            if self.record.epoch or restore else ([], [])
        for problem in problems:
            log.info("job %s: %s", self.job_id, problem)
        return JobCheckpoints(self.job_id, options.checked(), storage, self,
                              lambda: tasks_to_checkpoint(self.graph), self._tell_attempt,
                              self._fail_for_checkpoints, recovered, savepoints,
                              self.record.graph)

    def _tell_attempt(self, attempt_id: str, message: Any) -> None:
        self._schedule_snapshot()  # a checkpoint started or ended: observers see it
        execution = self.graph.execution(attempt_id)
        taskmanager_id = execution.taskmanager_id if execution is not None else None
        if taskmanager_id not in self._executors:
            return  # its TaskManager is gone: the attempt is failing over
        gateway = self._executor(taskmanager_id)
        if isinstance(message, p.TriggerCheckpoint):
            gateway.trigger_checkpoint(message)
        elif isinstance(message, p.NotifyCheckpointAborted):
            gateway.notify_checkpoint_aborted(message)
        else:
            gateway.notify_checkpoint_complete(message)

    def _fail_for_checkpoints(self, reason: str) -> None:
        if self.scheduler is not None and not self._ended:
            self._execute(self.scheduler.fail_job(TaskFailure("CheckpointFailure", reason),
                                                  time.time()))

    @handler(p.AcknowledgeCheckpoint, senders=(topics.TASKMANAGERS,))
    def acknowledge_checkpoint(self, ack: p.AcknowledgeCheckpoint) -> None:
        self._check_attempt_host(ack.attempt_id)
        if self.checkpoints is not None and not self._ended:
            execution = self.graph.execution(ack.attempt_id)
            self.checkpoints.acknowledged(ack, self._data_peers.endpoint(
                execution.taskmanager_id if execution is not None else None))
            self._schedule_snapshot()

    @handler(p.RequestStateChunk, senders=(topics.TASKMANAGERS,))
    def request_state_chunk(self, request: p.RequestStateChunk) -> Future[p.JobFileChunk]:
        """A chunk of the snapshot an attempt restores, for its TaskManager when that one
        does not see this machine's checkpoint folder (read on a worker thread)."""
        self._check_attempt_host(request.attempt_id)
        execution = self.graph.execution(request.attempt_id)
        if execution is None or self.checkpoints is None:
            raise ValueError(f"{request.attempt_id} is no attempt of a streaming job "
                             f"{self.job_id}")
        handle, path = self.checkpoints.snapshot_file(execution.subtask_id,
                                                      request.checkpoint_id)
        return self.run_in_worker(read_chunk, self.job_id, handle.path, str(path),
                                  request.offset, chunk_size(self.config["rpc.framesize"]),
                                  name="state-chunk")

    @handler(p.DeclineCheckpoint, senders=(topics.TASKMANAGERS,))
    def decline_checkpoint(self, decline: p.DeclineCheckpoint) -> None:
        self._check_attempt_host(decline.attempt_id)
        if self.checkpoints is not None and not self._ended:
            self.checkpoints.declined(decline)
            self._schedule_snapshot()

    def on_stop(self) -> None:
        """Main thread: let go of what this job held in the process's shared transport."""
        self.rpc_service.unsubscribe(topics.CLUSTER_EVENTS, self._on_cluster_event)
        self.rpc_service.forget_retained(topics.job_state(self.job_id))

    def _fail_before_start(self, error: Exception) -> None:
        log.warning("job %s cannot start: %s", self.job_id, error)
        self.events.status_changed(self.graph.status, JobStatus.FAILED, time.time())
        self._failed_outside_graph = True
        root = {"exception_type": type(error).__name__, "message": str(error),
                "traceback": "", "vertex_id": "", "subtask": -1}
        self._end(p.JobResult(self.job_id, self.record.graph.name, JobStatus.FAILED,
                              duration=0.0,
                              root_cause=root, failures=1))

    def on_unhandled_error(self, error: Exception, context: str) -> None:
        """Main thread: an error no asker hears of would leave the job waiting for ever;
        the job fails with it instead (Flink's JobMaster fails its job on an error of
        its own), after a cancel to every attempt still on a TaskManager."""
        super().on_unhandled_error(error, context)
        if self._ended:
            return
        for execution in self._live_executions():
            if execution.taskmanager_id in self._executors:
                self._executor(execution.taskmanager_id).cancel_task(
                    p.CancelTask(self.job_id, execution.attempt_id))
        root = {"exception_type": type(error).__name__, "vertex_id": "", "subtask": -1,
                "message": f"the JobMaster failed in {context}: {error}",
                "traceback": "".join(traceback.format_exception(error))[-6000:]}
        self.events.status_changed(self.graph.status, JobStatus.FAILED, time.time())
        self._failed_outside_graph = True
        finished, total = self.progress
        self._end(p.JobResult(self.job_id, self.record.graph.name, JobStatus.FAILED,
                              duration=0.0, root_cause=root, failures=1, finished=finished,
                              total=total))

    @property
    def progress(self) -> tuple[int, int]:
        """(finished, total) subtasks; main thread only (others get it via on_status)."""
        return self.graph.progress()

    def cancel(self) -> None:
        if self.scheduler is not None and not self._ended:
            self._execute(self.scheduler.cancel(time.time()))

    def savepoint(self, request: p.TriggerSavepoint, answer: Future[p.SavepointCompleted]
                  ) -> None:
        """Main thread: take a savepoint or stop; ``answer`` is completed when it is."""
        if self.checkpoints is None or self._ended:
            what = "not a streaming job" if self.checkpoints is None else "over"
            answer.set_exception(SavepointFailed(
                f"job {self.job_id} is {what}: savepoints are of running streaming jobs"))
            return
        chain(self.checkpoints.savepoint(request.stop, request.savepoint), answer)

    # -- from the ResourceManager and TaskExecutors ----------------------------------------

    @handler(p.OfferSlots, senders=(topics.JOBMANAGER,))
    def offer_slots(self, batch: p.OfferSlots) -> None:
        for offer in batch.offers:
            self._offered(offer)

    def _offered(self, offer: p.OfferSlot) -> None:
        if offer.allocation_id in self._withdrawn:  # crossed our FreeSlot: no longer ours
            self._withdrawn.discard(offer.allocation_id)
            return
        self._send_slot_requests(self._slot_requests.answered(offer.allocation_id))
        slot = SlotRef(offer.resource_id, offer.slot_index)
        self._allocations[slot] = offer.allocation_id
        self._executors[offer.resource_id] = offer.endpoint_id
        self._hosts[offer.resource_id] = offer.host
        self._data_peers.offered(offer)
        if self.scheduler is None or self._ended:
            self._free(slot)
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
        unseen = _files_the_client_reads(update)
        if unseen:  # applied once they are here: a finished task's rows are never lost
            execution = self.graph.execution(update.attempt_id)
            host = execution.taskmanager_id if execution is not None else None
            self._fetching.add(update.attempt_id)
            self.on_main_thread(
                self.run_in_worker(fetch_unseen, unseen, self._data_peers.endpoint(host),
                                   str(self.work_dir), name="fetch"),
                lambda _none, error: self._fetched(update, error))
            return p.UpdateAcknowledged(update.attempt_id, True, "")
        rejected = self._apply_update(update)
        return p.UpdateAcknowledged(update.attempt_id, not rejected, "; ".join(rejected))

    def _fetched(self, update: p.UpdateTaskExecutionState,
                 error: BaseException | None) -> None:
        self._fetching.discard(update.attempt_id)
        self._apply_update(update, error)

    def _apply_update(self, update: p.UpdateTaskExecutionState,
                      fetch_error: BaseException | None = None) -> list[str]:
        """The update's transition; a FINISHED whose files could not be fetched is a
        failure of the attempt instead, so failover runs it again."""
        if self.scheduler is None or self._ended:
            return ["the job is not running"]
        state, failure = update.state, update.failure
        if fetch_error is not None:
            state, failure = ExecutionState.FAILED, TaskFailure(
                "ResultNotFetched", f"the task finished, but what it left for the client "
                f"could not be fetched: {fetch_error}")
        out = self.scheduler.task_state_changed(update.attempt_id, state, time.time(),
                                                failure=failure, result=update.result)
        self._execute(out)
        return [i.reason for i in out if isinstance(i, ins.Rejected)]

    def _check_attempt_host(self, attempt_id: str) -> None:
        """Only the TaskManager an attempt was deployed to speaks for it (when the
        transport vouches for the sender: ``self.sender``)."""
        execution = self.graph.execution(attempt_id)
        host = execution.taskmanager_id if execution is not None else None
        if self.sender is not None and host is not None and host != self.sender:
            raise SenderMismatchError(f"attempt {attempt_id} runs on {host}, not on "
                                      f"{self.sender}")

    @handler(p.TaskOutput, senders=(topics.TASKMANAGERS,))
    def task_output(self, output: p.TaskOutput) -> None:
        """Pass what a running script printed on to its submitter, if it is one of this
        job's attempts, from the TaskManager running it, into one of its output files."""
        if self.graph.execution(output.attempt_id) is None:
            raise ValueError(f"output of {output.attempt_id}, no attempt of job {self.job_id}")
        self._check_attempt_host(output.attempt_id)
        if output.stream not in ("stdout", "stderr") or output.offset < 0 or \
                len(output.text) > p.OUTPUT_PIECE or \
                os.path.dirname(output.path) != str(self.work_dir / "output") or \
                not output.path.endswith(f".{output.stream}"):
            raise ValueError(f"malformed output of {output.attempt_id}")
        self.rpc_service.publish(topics.job_output(self.job_id), p.JobOutput(
            self.job_id, output.attempt_id, output.stream, output.path, output.offset,
            output.text))

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

    def _on_cluster_event(self, _topic: str, event: Any) -> None:
        if isinstance(event, p.TaskManagerLost):
            self.run_async(self._taskmanager_lost, event.resource_id, event.cause)

    def _taskmanager_lost(self, resource_id: str, cause: str) -> None:
        for slot in [s for s in self._allocations if s.taskmanager_id == resource_id]:
            self._allocations.pop(slot)
        if self.scheduler is not None and not self._ended:
            self._execute(self.scheduler.taskmanager_lost(resource_id, cause, time.time()))

    # -- carrying out the scheduler's instructions -------------------------------------------

    def _execute(self, instructions: list[Any]) -> None:
        for instruction in instructions:
            carry_out = self._handlers.get(type(instruction).__name__)
            if carry_out is not None:
                carry_out(self, instruction)
        if instructions:
            self._schedule_snapshot()

    def _job_status_changed(self, change: ins.JobStatusChanged) -> None:
        self.events.status_changed(change.old, change.new, change.timestamp)
        self._on_status(change.new, *self.progress)

    def _execution_state_changed(self, change: ins.ExecutionStateChanged) -> None:
        execution = self.graph.execution(change.attempt_id)
        slot = execution.slot if execution else None
        self.events.execution_moved(p.ExecutionStateEvent(
            self.job_id, change.attempt_id, change.vertex_id, change.subtask, change.attempt,
            change.old, change.new, change.timestamp,
            slot.taskmanager_id if slot else None, slot.slot_index if slot else None,
            change.failure))
        if change.new in (ExecutionState.FAILED, ExecutionState.CANCELING) \
                and self.checkpoints is not None:
            self.checkpoints.failing_over(f"{change.attempt_id} is {change.new}")
        if change.new.is_terminal:
            self._offloaded_inputs.pop(change.attempt_id, None)
            self._confirmed.discard(change.attempt_id)
            self._reconciler.forget(change.attempt_id)
        if change.new is ExecutionState.FINISHED and execution is not None:
            if self.checkpoints is not None:
                self.checkpoints.task_finished(execution.subtask_id, execution.attempt_id)
            self.progress_log.append(FinishedSubtask(
                execution.vertex_id, execution.subtask, execution.attempt_id, execution.attempt,
                execution.result, tuple(s.split_id for s in execution.input_splits)))
            self._report_progress_soon()

    def _publish(self, topic: str, message: Any) -> None:
        self.rpc_service.publish(topic, message)

    def _report_progress_soon(self) -> None:
        """The Dispatcher's job list shows progress, reported at most every
        PROGRESS_INTERVAL: counting it is linear in the job's subtasks, and the list is
        published whole, so a job finishing hundreds of subtasks a second would do both
        for each. Status changes are reported at once."""
        if not self._progress_due:
            self._progress_due = True
            self.schedule(PROGRESS_INTERVAL, self._report_progress)

    def _report_progress(self) -> None:
        self._progress_due = False
        if not self._ended:
            self._on_status(self.graph.status, *self.progress)

    def _request_slot(self, request: ins.AllocateSlot) -> None:
        self._send_slot_requests(self._slot_requests.add(request.attempt_id))

    def _send_slot_requests(self, allocation_ids: list[str]) -> None:
        for allocation_id in allocation_ids:
            self._to_resource_manager(p.RequestSlot(self.job_id, allocation_id,
                                                    self.endpoint_id))

    def _withdraw_slot_request(self, withdraw: ins.WithdrawSlotRequest) -> None:
        """The attempt runs in a slot the job held: its request goes on to the next
        attempt waiting for a slot, or, none waiting, is freed at the ResourceManager,
        waiting or (an offer on its way) allocated already."""
        allocation_id = self._slot_requests.withdraw(withdraw.attempt_id)
        if allocation_id is not None:
            self._withdrawn.add(allocation_id)
            self._to_resource_manager(p.FreeSlot(self.job_id, allocation_id))

    def _to_resource_manager(self, message: p.RequestSlot | p.FreeSlot) -> None:
        """Queued: the slot requests and frees of this turn go in one SlotRequests."""
        if self._slot_messages.add(RESOURCE_MANAGER, message):
            self.run_async(self._send_slot_messages)

    def _send_slot_messages(self) -> None:
        for _, batch in self._slot_messages.take():
            # a single request or free too large for a frame: a frame far too small to run
            send_in_halves(batch, self._send_slot_batch)

    def _send_slot_batch(self, batch: tuple[p.RequestSlot | p.FreeSlot, ...]) -> None:
        self.resource_manager.slot_requests(p.SlotRequests(
            tuple(m for m in batch if isinstance(m, p.RequestSlot)),
            tuple(m for m in batch if isinstance(m, p.FreeSlot))))

    def _release_slot(self, release: ins.ReleaseSlot) -> None:
        self._free(release.slot)

    def _free(self, slot: SlotRef) -> None:
        allocation_id = self._allocations.pop(slot, None)
        if allocation_id is not None:
            self._to_resource_manager(p.FreeSlot(self.job_id, allocation_id))

    def _deploy(self, deploy: ins.DeployTask) -> None:
        """Queued: the deployments of this turn go to each TaskManager in one message."""
        slot = deploy.slot
        task = p.SubmitTask(
            job_id=self.job_id, graph=self.record.graph, attempt_id=deploy.attempt_id,
            vertex_id=deploy.vertex_id, subtask=deploy.subtask,
            parallelism=deploy.parallelism, attempt=deploy.attempt,
            slot_index=slot.slot_index, allocation_id=self._allocations.get(slot, ""),
            jobmaster=self.endpoint_id, fencing_token=self.fencing_token,
            artifact_sha256=self.record.artifact_sha256, work_dir=str(self.work_dir),
            args=self.record.args, inputs=deploy.inputs, outputs=deploy.outputs,
            task_timeout=self.record.task_timeout,
            data_endpoints=self._data_peers.for_inputs(deploy.inputs, slot.taskmanager_id),
            splits=deploy.splits or (), splits_given=deploy.splits is not None)
        if self.checkpoints is not None:
            restore_checkpoint, restore_state = self.checkpoints.restore_of(
                subtask_id(deploy.vertex_id, deploy.subtask))
            try:
                stream_inputs = self._stream_inputs(deploy)
            except NoChannelServer as error:
                self.run_async(self._deployment_failed, deploy.attempt_id, str(error))
                return
            task = replace(task, restore_checkpoint=restore_checkpoint,
                           restore_state=restore_state, stream_inputs=stream_inputs)
            if restore_checkpoint:  # for the snapshot: the job resumed from it, now
                self._restored = RestoredCheckpointStats(restore_checkpoint, time.time())
        if self._deployments.add(slot.taskmanager_id, task):
            self.run_async(self._send_deployments)

    def _stream_inputs(self, deploy: ins.DeployTask) -> tuple[StreamChannel, ...]:
        """Where a streaming consumer reads each producer: the producers hold their slots
        already (the scheduler deploys a pipelined job once every subtask has one)."""
        return tuple(
            self._data_peers.stream_channel(producer.taskmanager_id, producer.attempt_id,
                                            subpartition)
            for producer, subpartition in self.graph.stream_producers(deploy.vertex_id,
                                                                      deploy.subtask))

    def _send_deployments(self) -> None:
        for taskmanager_id, tasks in self._deployments.take():
            self._send_tasks(tasks, taskmanager_id)

    def _send_tasks(self, tasks: tuple[p.SubmitTask, ...], taskmanager_id: str,
                    tries: int = 0) -> None:
        """The ask encodes first: a batch too large is refused before sending, and goes
        in halves; a single deployment too large goes again without its input partitions,
        and fails its attempt when even that does not fit."""
        gateway = self._executor(taskmanager_id)

        def send(batch: tuple[p.SubmitTask, ...]) -> None:
            sent = gateway.submit_tasks(p.SubmitTasks.of(batch))
            self.on_main_thread(sent, lambda answer, error: self._deployed(
                batch, taskmanager_id, tries, answer, error))

        def alone(task: p.SubmitTask, error: FrameTooLargeError) -> None:
            if task.inputs and not task.inputs_offloaded:
                self._send_tasks((self._offloaded(task),), taskmanager_id, tries)
            else:
                self._deployment_failed(task.attempt_id,
                                        f"the deployment is too large: {error}")

        send_in_halves(tasks, send, alone)

    def _offloaded(self, task: p.SubmitTask) -> p.SubmitTask:
        """The deployment without its input partitions, which the task then asks for page
        by page; kept here until the attempt ends."""
        self._offloaded_inputs[task.attempt_id] = task.inputs
        return replace(task, inputs_offloaded=True, inputs=tuple(
            replace(edge, partitions=()) for edge in task.inputs))

    @handler(p.RequestInputPartitions, senders=(topics.TASKMANAGERS,))
    def request_input_partitions(self, request: p.RequestInputPartitions
                                 ) -> p.InputPartitions:
        self._check_attempt_host(request.attempt_id)
        inputs = self._offloaded_inputs.get(request.attempt_id)
        if inputs is None:
            raise LookupError(f"attempt {request.attempt_id} has no offloaded inputs here")
        edge = next((e for e in inputs if e.input_index == request.input_index), None)
        if edge is None:
            raise LookupError(f"attempt {request.attempt_id} has no input {request.input_index}")
        page = max(1, self.config["rpc.framesize"] // PARTITION_REF_BYTES)
        return p.InputPartitions(edge.partitions[request.offset:request.offset + page],
                                 len(edge.partitions))

    def _deployed(self, tasks: tuple[p.SubmitTask, ...], taskmanager_id: str, tries: int,
                  answer: Any, error: BaseException | None) -> None:
        results = answer.results if error is None and \
            isinstance(answer, p.TaskOperationResults) else ()
        if error is None and len(results) != len(tasks):
            error = ValueError(f"{len(results)} answers to {len(tasks)} deployments")
        answers = results if error is None else (None,) * len(tasks)
        again = []
        for task, result in zip(tasks, answers, strict=True):
            execution = self.graph.execution(task.attempt_id)
            if result is not None and result.success and result.attempt_id == task.attempt_id:
                if execution is not None and not execution.state.is_terminal:
                    self._confirmed.add(task.attempt_id)
                continue
            still_deploying = execution is not None and \
                execution.state is ExecutionState.DEPLOYING
            if isinstance(error, AskTimeoutError) and tries < DEPLOY_TRIES and still_deploying:
                # The message or its answer may have been lost (a broker restart): a
                # TaskExecutor treats a repeated SubmitTask of a running attempt as done.
                again.append(task)
                continue
            self._deployment_failed(task.attempt_id, str(error) if error
                                    else result.message if result else "refused")
        if again:
            self._send_tasks(tuple(again), taskmanager_id, tries + 1)

    def _deployment_failed(self, attempt_id: str, reason: str) -> None:
        if self.scheduler is not None and not self._ended:
            self._execute(self.scheduler.task_state_changed(
                attempt_id, ExecutionState.FAILED, time.time(),
                failure=TaskFailure("DeploymentFailed", f"could not deploy: {reason}")))

    def _cancel_task(self, cancel: ins.CancelAttempt) -> None:
        """A cancel always ends: at once when the TaskExecutor does not run the attempt
        (its final update was lost), else with its CANCELED update, else after
        ``jobmanager.cancel-timeout`` even if the TaskManager never answers. Deployments
        still queued go first: a cancel must never overtake the deployment it cancels."""
        self._send_deployments()
        gateway = self._executor(cancel.taskmanager_id)
        self.on_main_thread(gateway.cancel_task(p.CancelTask(self.job_id, cancel.attempt_id)),
                            lambda answer, _error: self._cancel_answered(cancel, answer))
        self.schedule(self.config["jobmanager.cancel-timeout"], self._cancel_overdue, cancel)

    def _cancel_answered(self, cancel: ins.CancelAttempt, answer: Any) -> None:
        if isinstance(answer, p.TaskOperationResult) and not answer.known:
            self._cancel_confirmed(cancel.attempt_id, f"TaskManager {cancel.taskmanager_id} "
                                   "no longer runs it")

    def _cancel_overdue(self, cancel: ins.CancelAttempt) -> None:
        self._cancel_confirmed(cancel.attempt_id, f"TaskManager {cancel.taskmanager_id} did "
                               "not confirm the cancel within jobmanager.cancel-timeout")

    def _cancel_confirmed(self, attempt_id: str, why: str) -> None:
        execution = self.graph.execution(attempt_id)
        if (self.scheduler is None or self._ended or execution is None
                or execution.state is not ExecutionState.CANCELING):
            return
        log.warning("job %s: %s taken as CANCELED: %s", self.job_id, attempt_id, why)
        self._execute(self.scheduler.task_state_changed(attempt_id, ExecutionState.CANCELED,
                                                        time.time()))

    # -- reconciliation: the JobMaster's heartbeat to the TaskExecutors of its attempts -----

    def _reconcile_round(self) -> None:
        if self._ended or self.scheduler is None:
            return
        self._execute(self.scheduler.slots_overdue(
            time.time(), self.config["jobmanager.slot-request-timeout"]))
        if self._ended:
            return
        for taskmanager_id in self._taskmanagers_in_use():
            if taskmanager_id in self._reports_pending:
                continue  # no answer yet: a lost TaskManager is the ResourceManager's call
            self._reports_pending.add(taskmanager_id)
            asked = self._executor(taskmanager_id).request_execution_report(
                p.RequestExecutionReport(self.job_id), self.config["heartbeat.timeout"])
            self.on_main_thread(asked, lambda report, _error, tm=taskmanager_id:
                                self._reported(tm, report))
        self.schedule(self.config["heartbeat.interval"], self._reconcile_round)

    def _taskmanagers_in_use(self) -> set[str]:
        in_use = {e.taskmanager_id for e in self._live_executions() if e.taskmanager_id}
        in_use.update(slot.taskmanager_id for slot in self._allocations)
        return {tm for tm in in_use if tm in self._executors}

    def _live_executions(self) -> list[Execution]:
        return [e for e in self.graph.current_executions()
                if e.state in (ExecutionState.DEPLOYING, ExecutionState.RUNNING,
                               ExecutionState.CANCELING)]

    def _reported(self, taskmanager_id: str, report: Any) -> None:
        self._reports_pending.discard(taskmanager_id)
        if not isinstance(report, p.ExecutionReport) or self._ended or self.scheduler is None:
            return
        there = [e for e in self._live_executions() if e.taskmanager_id == taskmanager_id]
        expected = {e.attempt_id for e in there if (e.state is not ExecutionState.DEPLOYING
                    or e.attempt_id in self._confirmed) and e.attempt_id not in self._fetching}
        outcome = self._reconciler.reconcile(report, expected, {e.attempt_id for e in there})
        for attempt_id in outcome.lost:
            self._update_lost(attempt_id, taskmanager_id)
        for attempt_id in outcome.unknown:
            log.warning("job %s: TaskManager %s runs %s, which this JobMaster does not run "
                        "there: cancelling it", self.job_id, taskmanager_id, attempt_id)
            self._executor(taskmanager_id).cancel_task(p.CancelTask(self.job_id, attempt_id))

    def _update_lost(self, attempt_id: str, taskmanager_id: str) -> None:
        execution = self.graph.execution(attempt_id)
        if execution is None or self.scheduler is None:
            return
        if execution.state is ExecutionState.CANCELING:
            self._cancel_confirmed(attempt_id, f"TaskManager {taskmanager_id} no longer runs it")
            return
        log.error("job %s: TaskManager %s no longer runs %s (%s here): its last update was "
                  "lost", self.job_id, taskmanager_id, attempt_id, execution.state)
        self._execute(self.scheduler.task_state_changed(
            attempt_id, ExecutionState.FAILED, time.time(), failure=TaskFailure(
                "UpdateLost", f"TaskManager {taskmanager_id} no longer runs this attempt and "
                f"its final update never arrived (last known state {execution.state}, "
                f"found by deployment reconciliation)")))

    def _executor(self, taskmanager_id: str) -> TaskExecutorGateway:
        return self.rpc_service.gateway(TaskExecutorGateway, self._executors[taskmanager_id])

    def _schedule_restart(self, restart: ins.ScheduleRestart) -> None:
        self.schedule(restart.delay, self._restart_due)

    def _restart_due(self) -> None:
        if self.scheduler is not None and not self._ended:
            self._execute(self.scheduler.restart_due(time.time()))

    def _job_finished(self, finished: ins.JobFinished) -> None:
        results = [r for r in finished.results.values() if isinstance(r, p.TaskResult)]
        self._end(self._result(JobStatus.FINISHED, finished.duration, results))

    def _job_failed(self, failed: ins.JobFailed) -> None:
        self._end(self._result(JobStatus.FAILED, failed.duration, [],
                               root_cause=_trimmed(failed.root_cause.to_dict())))

    def _job_canceled(self, canceled: ins.JobCanceled) -> None:
        self._end(self._result(JobStatus.CANCELED, canceled.duration, []))

    _handlers: dict[str, Callable[[JobMaster, Any], None]] = {
        "JobStatusChanged": _job_status_changed,
        "ExecutionStateChanged": _execution_state_changed,
        "AllocateSlot": _request_slot,
        "ReleaseSlot": _release_slot,
        "WithdrawSlotRequest": _withdraw_slot_request,
        "DeployTask": _deploy,
        "CancelAttempt": _cancel_task,
        "ScheduleRestart": _schedule_restart,
        "JobFinished": _job_finished,
        "JobFailed": _job_failed,
        "JobCanceled": _job_canceled,
    }

    # -- the end -----------------------------------------------------------------------------

    def _result(self, status: JobStatus, duration: float, results: list[p.TaskResult],
                root_cause: dict[str, Any] | None = None) -> p.JobResult:
        finished, total = self.progress
        accumulators: dict[str, Any] = {}
        for result in results:
            for name, value in result.counters.items():
                accumulators[name] = accumulators.get(name, 0) + value
        records = self._records_per_vertex()
        return fitted(p.JobResult(
            job_id=self.job_id, name=self.record.graph.name, status=status,
            duration=round(duration, 3), accumulators=accumulators, records=records,
            outputs=tuple(dict.fromkeys(o for r in results for o in r.outputs)),
            collected_paths=tuple(r.collected_path for r in self._ordered_results()
                                  if r.collected_path) if status is JobStatus.FINISHED else (),
            stdout="".join(r.stdout for r in results), stderr="".join(r.stderr for r in results),
            stdout_paths=tuple(r.stdout_path for r in results if r.stdout_path),
            stderr_paths=tuple(r.stderr_path for r in results if r.stderr_path),
            root_cause=root_cause, failures=len(self.graph.failures), finished=finished,
            total=total, failure_history=tuple(
                _trimmed(f.to_dict()) for f in self.graph.failures[-MAX_HISTORY:])),
            self.work_dir)

    def _ordered_results(self) -> list[p.TaskResult]:
        return [s.current.result for s in self.graph.subtasks()
                if isinstance(s.current.result, p.TaskResult)]

    def _records_per_vertex(self) -> dict[str, Any]:
        records: dict[str, Any] = {}
        for subtask in self.graph.subtasks():
            result = subtask.current.result
            if isinstance(result, p.TaskResult):
                entry = records.setdefault(subtask.vertex_id, {"in": 0, "out": 0})
                entry["in"] += result.records_in
                entry["out"] += result.records_out
        return records

    def _end(self, result: p.JobResult) -> None:
        if self._ended:
            return
        self._ended = True
        if self.checkpoints is not None:
            self.checkpoints.stop(f"the job ended {result.status}")
        try:
            self.progress_log.close()
            self.events.flush()
            self._send_slot_messages()
            self.resource_manager.release_job_slots(p.ReleaseJobSlots(self.job_id))
            self._allocations.clear()
            self._slot_requests.clear()
            self._withdrawn.clear()
            self._publish_snapshot()
        finally:  # whatever else fails, the Dispatcher and the client learn the end
            self._on_terminal(result)

    # -- observers -----------------------------------------------------------------------------

    def _schedule_snapshot(self) -> None:
        if not self._snapshot_due:
            self._snapshot_due = True
            # A large job's snapshot costs more to build, send and redraw; its events carry
            # every change meanwhile.
            self.schedule(max(SNAPSHOT_INTERVAL, self._subtasks / SUBTASKS_PER_SNAPSHOT_SECOND),
                          self._publish_snapshot)

    def _publish_snapshot(self) -> None:
        self._snapshot_due = False
        snapshot = replace(self.graph.snapshot(), hosts=dict(self._hosts), checkpoints=None
                           if self.checkpoints is None
                           else stats_of(self.checkpoints.coordinator, self._restored))
        if self._failed_outside_graph:  # the graph never ran, or its JobMaster failed
            snapshot = replace(snapshot, status=JobStatus.FAILED)
        # A job's snapshot only grows: start from the reduction that fitted last time
        # rather than encode a megabyte that is bound to be refused again.
        first = self._snapshot_level
        for level, candidate in reductions(snapshot, first):
            try:  # publish encodes first: a snapshot too large is refused before sending
                self.rpc_service.publish(topics.job_state(self.job_id),
                                         p.JobSnapshot(self.job_id, candidate), retained=True)
                self._snapshot_level = level
                return
            except FrameTooLargeError:
                continue
        log.warning("job %s: even its smallest snapshot exceeds rpc.framesize", self.job_id)
