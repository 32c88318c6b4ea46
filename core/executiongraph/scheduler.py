"""The batch scheduler as a pure state machine: events in, instructions out.

Every public method is one event (the job starts, a slot is offered, a task reports a
new state, a TaskManager is lost, a restart is due, the user cancels) and returns the
instructions the JobMaster must carry out, in order. Nothing here sends, sleeps, reads
a clock or starts a thread, so the whole life of a job, failures included, is tested by
feeding events to it. The JobMaster calls it from its main thread only.

Scheduling follows Flink's lazy-from-sources batch mode: sources are scheduled when
the job starts; a consumer vertex is scheduled once every producer on every input edge
has finished (blocking exchange, ``ScheduleOrUpdateConsumers``). Reports are idempotent
per attempt id: a duplicate changes nothing and a report from a replaced attempt, or
from an attempt of an earlier JobManager run (epoch), is rejected, so retried or late
messages cannot corrupt the graph.

Failover (Flink's ``jobmanager.execution.failover-strategy``) is "region" or "full".
Region restarts the failed subtasks and what they need (``failover_region``) while the
rest of the job runs on. Full stops the whole job: the job goes RESTARTING, every
running task is cancelled, and once all have stopped and the backoff has passed the job
is RUNNING again with a new attempt for every subtask that has no usable result. Unlike
Flink, which recomputes everything, a finished subtask keeps its result: blocking
partitions are immutable files in the shared work directory, named after the attempt
that wrote them, so reading them again is as good as writing them again. A finished
subtask runs again only when its partitions were lost (its TaskManager's local disk
went with it, or a consumer reported them missing: a failure whose ``lost_producers``
name it) and a consumer still needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from clusterdeck.core.executiongraph.execution import Execution, ExecutionVertex, SlotRef
from clusterdeck.core.executiongraph.failover import failover_region, pipelined_region
from clusterdeck.core.executiongraph.failurehandling import (
    lose_partitions,
    partitions_not_found,
    record_failure,
    stranded_splits,
    without_usable_result,
)
from clusterdeck.core.executiongraph.graph import ExecutionGraph, ExecutionJobVertex
from clusterdeck.core.executiongraph.instructions import (
    AllocateSlot,
    AssignSplit,
    CancelAttempt,
    DeployTask,
    ExecutionStateChanged,
    Instruction,
    JobCanceled,
    JobFailed,
    JobFinished,
    JobStatusChanged,
    NewAttempt,
    Rejected,
    ReleaseSlot,
    ScheduleOrUpdateConsumers,
    ScheduleRestart,
    WithdrawSlotRequest,
)
from clusterdeck.core.executiongraph.recovery import FinishedSubtask, restore_finished
from clusterdeck.core.executiongraph.restart import NoRestart, RestartStrategy
from clusterdeck.core.executiongraph.slots import SlotBook
from clusterdeck.core.executiongraph.splitassigner import InputSplitAssigner
from clusterdeck.core.executiongraph.tasktimes import TaskTimes
from clusterdeck.core.protocol.failures import TASKMANAGER_LOST, TaskFailure
from clusterdeck.core.protocol.ids import parse_attempt_id, parse_subtask_id
from clusterdeck.core.protocol.states import ExecutionState, IllegalTransition, JobStatus

FailoverStrategy = Literal["region", "full"]
FAILOVER_STRATEGIES: tuple[FailoverStrategy, ...] = ("region", "full")

_REPORTABLE = frozenset({ExecutionState.RUNNING, ExecutionState.FINISHED,
                         ExecutionState.FAILED, ExecutionState.CANCELED})
_ON_A_TASKMANAGER = frozenset({ExecutionState.DEPLOYING, ExecutionState.RUNNING})


@dataclass(frozen=True)
class _PendingRestart:
    due: float
    subtasks: tuple[str, ...]
    full: bool = False  # every subtask without a usable result, counted when it is due


class Scheduler:
    """Drives one job's ExecutionGraph from start to FINISHED, FAILED or CANCELED.

    ``partitions_outlive_taskmanagers`` says where result partitions live: True for the
    shared work directory, False for a TaskManager's local disk, in which case a lost
    TaskManager takes the partitions of its finished subtasks with it; the JobMaster
    says it per finished attempt instead (``taskmanager_lost``). ``failover``
    is "region" or "full" (see the module docstring).
    """

    def __init__(self, graph: ExecutionGraph, restart_strategy: RestartStrategy | None = None,
                 splits: InputSplitAssigner | None = None, *,
                 partitions_outlive_taskmanagers: bool = True,
                 failover: FailoverStrategy = "region", deploy_ahead: float = 1.0,
                 pipelined: bool = False, avoid: Container[str] = frozenset()) -> None:
        if failover not in FAILOVER_STRATEGIES:
            raise ValueError(f"failover must be one of {FAILOVER_STRATEGIES}, got {failover!r}")
        self.graph = graph
        self.restart_strategy: RestartStrategy = restart_strategy or NoRestart()
        self.splits = splits or InputSplitAssigner()
        self.partitions_outlive_taskmanagers = partitions_outlive_taskmanagers
        self.failover: FailoverStrategy = failover
        self._slots = SlotBook(graph)
        # Attempts are deployed ahead behind a slot's holder (SlotBook), as many as cover
        # a round trip to the JobMaster (TaskTimes.ahead), only behind tasks of a vertex
        # whose tasks take less than ``deploy_ahead`` seconds (0: never): the round trip
        # matters only for short tasks, and an attempt queued behind a long one could miss
        # a slot that frees meanwhile elsewhere.
        self.deploy_ahead = deploy_ahead
        self._task_times = TaskTimes()
        self._pending_restarts: list[_PendingRestart] = []
        self._started_at: float | None = None
        # A streaming job's exchanges are pipelined: every subtask runs at once, a
        # consumer is deployed knowing where its producers run, and a failure restarts
        # everything connected to it (Flink's pipelined region).
        self.pipelined = pipelined
        # TaskManagers the job blocked (the JobMaster's blocklist): a slot of one that
        # frees goes back, and none is deployed into ahead; the offers come from elsewhere.
        self.avoid = avoid

    @property
    def status(self) -> JobStatus:
        return self.graph.status

    # -- recovery --------------------------------------------------------------------------

    def restore_finished(self, records: Iterable[FinishedSubtask]) -> None:
        """Before ``start``, after a JobManager restart: put back the subtasks that had
        finished (see ``clusterdeck.core.executiongraph.recovery``); ``start`` then runs the rest.
        Raises ValueError, changing nothing, when a record does not fit this job."""
        if self.status is not JobStatus.CREATED:
            raise IllegalTransition(f"job {self.graph.job_id} is {self.status}: finished "
                                    f"subtasks can only be restored before it starts")
        restore_finished(self.graph, self.splits, records)

    # -- events ----------------------------------------------------------------------------

    def start(self, now: float) -> list[Instruction]:
        """Run the job: schedule every unfinished subtask whose inputs are ready, i.e. the
        sources, plus (after a recovery) consumers whose producers were all restored. A
        job restored complete finishes at once."""
        if self.status is not JobStatus.CREATED:
            return [Rejected(None, f"job {self.graph.job_id} is {self.status}, not CREATED")]
        self._started_at = now
        out: list[Instruction] = [self._job(JobStatus.RUNNING, now)]
        for vertex in self.graph.vertices.values():
            if vertex.inputs and not self.pipelined:
                out += self._schedule_consumers(vertex, now)
                continue
            for subtask in vertex.subtasks:
                if subtask.current.state is ExecutionState.CREATED:
                    out += self._schedule(subtask.current, now)
        return out + self._finish_if_done(now)

    def slot_offered(self, taskmanager_id: str, slot_index: int,
                     now: float) -> list[Instruction]:
        """A slot arrived: deploy the longest-waiting scheduled subtask into it, or give
        the slot back when nothing waits."""
        slot = SlotRef(taskmanager_id, slot_index)
        if (holder := self._slots.holder(slot)) is not None:
            return [Rejected(None, f"slot {taskmanager_id}:{slot_index} is in use by "
                                   f"{holder.attempt_id}")]
        execution = self._slots.next_waiting() if self.status is JobStatus.RUNNING else None
        if execution is None:
            return [ReleaseSlot(slot)]
        if self.pipelined:
            return self._gather(slot, execution, now)
        return self._deploy_into(slot, execution, now) + self._ahead(slot, now)

    def _gather(self, slot: SlotRef, execution: Execution, now: float) -> list[Instruction]:
        """Pipelined: hold the slot for ``execution``; once no attempt waits for one, deploy
        every attempt holding a slot (Flink's pipelined region scheduling allocates a
        region's slots before it deploys the region)."""
        self._slots.hold(slot, execution)
        execution.slot = slot
        if self._slots.still_waiting():
            return []
        out: list[Instruction] = []
        for held_slot, held in self._slots.held():
            if held.state is ExecutionState.SCHEDULED and self.graph.is_current(held):
                out += self._deploy(held_slot, held, now)
        return out

    def _deploy_into(self, slot: SlotRef, execution: Execution,
                     now: float) -> list[Instruction]:
        self._slots.hold(slot, execution)
        return self._deploy(slot, execution, now)

    def _ahead(self, slot: SlotRef, now: float) -> list[Instruction]:
        """Deploy the longest-waiting attempts behind the slot's holder (Flink's batch
        scheduler deploys what is ready at once; here a slot runs one task at a time, so
        the next ones wait on its TaskManager, not on the JobMaster)."""
        holder = self._slots.holder(slot)
        if holder is None or self.status is not JobStatus.RUNNING \
                or slot.taskmanager_id in self.avoid \
                or not self._task_times.shorter_than(holder.vertex_id, self.deploy_ahead):
            return []
        queue = self._slots.queue_behind(slot)
        depth = self._task_times.ahead(holder.vertex_id)
        out: list[Instruction] = []
        while len(queue) < depth:
            execution = self._slots.next_waiting()
            if execution is None:
                break
            queue.append(execution)
            out += [WithdrawSlotRequest(execution.attempt_id),
                    *self._deploy(slot, execution, now)]
        self._slots.keep_queue(slot, queue)
        return out

    def _deploy(self, slot: SlotRef, execution: Execution, now: float) -> list[Instruction]:
        execution.slot = slot
        changed = self._move(execution, ExecutionState.DEPLOYING, now)
        vertex = self.graph.vertex(execution.vertex_id)
        # A generated source's part goes with the deployment: two asks fewer per subtask
        splits = self.splits.own_part(execution.vertex_id, execution.subtask)
        execution.input_splits.extend(splits or ())
        deploy = DeployTask(
            job_id=self.graph.job_id, attempt_id=execution.attempt_id,
            vertex_id=execution.vertex_id, subtask=execution.subtask,
            parallelism=vertex.parallelism, attempt=execution.attempt, slot=slot,
            inputs=self.graph.input_partitions(execution.vertex_id, execution.subtask),
            outputs=self.graph.output_partitions(execution.vertex_id), splits=splits)
        return [changed, deploy]

    def _reuse(self, slot: SlotRef | None, now: float) -> list[Instruction]:
        """A finished attempt's slot goes straight to the longest-waiting attempt, without
        a round trip to the ResourceManager; back to it when nothing waits."""
        if slot is None:
            return []
        execution = self._slots.next_waiting() if self.status is JobStatus.RUNNING \
            and slot.taskmanager_id not in self.avoid else None
        if execution is None:
            return [ReleaseSlot(slot)]
        if self.pipelined:
            return [WithdrawSlotRequest(execution.attempt_id),
                    *self._gather(slot, execution, now)]
        return [WithdrawSlotRequest(execution.attempt_id),
                *self._deploy_into(slot, execution, now)]

    def _refill(self, slot: SlotRef | None, now: float) -> list[Instruction]:
        """The slot's first queued attempt took over from its holder: top the queue up."""
        return [] if slot is None else self._ahead(slot, now)

    def task_state_changed(self, attempt_id: str, state: ExecutionState | str, now: float, *,
                           failure: TaskFailure | None = None,
                           result: Any = None) -> list[Instruction]:
        """A TaskManager reports RUNNING, FINISHED, FAILED or CANCELED for one attempt."""
        try:
            state = ExecutionState(state)
        except ValueError:
            return [Rejected(attempt_id, f"unknown execution state {state!r}")]
        execution = self._current(attempt_id)
        if isinstance(execution, Rejected):
            return [execution]
        if state is execution.state:
            return []
        if state not in _REPORTABLE:
            return [Rejected(attempt_id, f"a TaskManager cannot report {state}")]
        if execution.state is ExecutionState.CANCELING:
            return [] if state is ExecutionState.RUNNING else self._cancelled(execution, now)
        if execution.state not in _ON_A_TASKMANAGER:
            return [Rejected(attempt_id, f"{attempt_id} is {execution.state}, cannot become "
                                         f"{state}")]
        if state is ExecutionState.RUNNING:
            return [self._move(execution, state, now)]
        if state is ExecutionState.FINISHED and (
                stranded := stranded_splits(self.graph, self.splits, execution)):
            return self.task_state_changed(attempt_id, ExecutionState.FAILED, now,
                                           failure=stranded)
        if state is ExecutionState.FINISHED:
            execution.result = result
            self._task_times.finished(execution, now)
            out = [self._move(execution, state, now)]
            freed = self._slots.unhold(execution)
            after = self._after_finished(execution, now)  # may schedule its consumers
            if self.status is JobStatus.RUNNING:
                return out + after + self._reuse(freed, now) + self._refill(execution.slot, now)
            return out + ([ReleaseSlot(freed)] if freed else []) + after  # the end comes last
        if state is ExecutionState.CANCELED:
            failure = TaskFailure("UnexpectedCancellation",
                                  "the task stopped as canceled, but no cancel was sent")
        failure = failure or TaskFailure("UnknownFailure",
                                         "the task failed without reporting a cause")
        out = self._fail(execution, failure, now)
        out += self._release(execution)
        partitions_not_found(self.graph, execution, failure.lost_producers)
        return out + self._after_failures([execution.subtask_id], now)

    def request_split(self, attempt_id: str, host: str | None) -> list[Instruction]:
        """A running source asks for its next input split (Flink's RequestNextInputSplit)."""
        execution = self._current(attempt_id)
        if isinstance(execution, Rejected):
            return [execution]
        if execution.state not in _ON_A_TASKMANAGER:
            return [Rejected(attempt_id, f"{attempt_id} is {execution.state}, not running")]
        split = self.splits.next_split(execution.vertex_id, execution.subtask, host)
        if split is not None:
            execution.input_splits.append(split)
        return [AssignSplit(attempt_id, split)]

    def taskmanager_lost(self, taskmanager_id: str, cause: str, now: float, *,
                         partitions_kept: Callable[[Execution], bool] | None = None
                         ) -> list[Instruction]:
        """A TaskManager died or stopped answering: its tasks fail (one failure event for
        the restart strategy) and the finished output that went with it is made again at
        once. ``partitions_kept`` says, per finished attempt it ran, whether that one's
        result partitions outlive it (default: ``partitions_outlive_taskmanagers``); the
        producers of those that do not run again in the same failover region as the
        consumers still needing them (Flink's region failover of lost partitions)."""
        out: list[Instruction] = []
        failed: list[str] = []
        message = f"lost TaskManager {taskmanager_id}: {cause}"
        for execution in self._slots.take_lost(taskmanager_id):
            if execution.state is ExecutionState.CANCELING:
                out.append(self._move(execution, ExecutionState.CANCELED, now))
            else:
                out += self._fail(execution, TaskFailure(TASKMANAGER_LOST, message), now)
                failed.append(execution.subtask_id)
        if out and self.status is JobStatus.RUNNING:
            out += self._run_due_restarts(now)
        kept = partitions_kept or (lambda _finished: self.partitions_outlive_taskmanagers)
        failed += lose_partitions(self.graph, taskmanager_id, cause, now, kept)
        if self.status is JobStatus.RESTARTING:
            # A full restart under way absorbs the loss: it reruns what was lost.
            return out + self._run_due_restarts(now)
        if not failed:
            return out + self._terminate_if_quiet(now)
        return out + self._after_failures(failed, now)

    def leave_avoided(self, now: float) -> list[Instruction]:
        """A TaskManager is avoided now (blocked): the attempts sent there that have not
        started (queued behind a slot's holder, or still deploying) are cancelled and run
        again elsewhere at once, counting no failure: they would meet what blocked it.
        Not for a pipelined job, whose subtasks deploy together (its region restarts)."""
        if self.pipelined or self.status is not JobStatus.RUNNING:
            return []
        unstarted = [e for e in self.graph.current_executions()
                     if e.state is ExecutionState.DEPLOYING and e.taskmanager_id in self.avoid]
        if unstarted:
            self._pending_restarts.append(
                _PendingRestart(now, tuple(e.subtask_id for e in unstarted)))
        return self._cancel(unstarted, now)

    def restart_due(self, now: float) -> list[Instruction]:
        """The backoff of one or more earlier ``ScheduleRestart`` has passed: restart each
        region whose subtasks have all stopped (the others follow their last cancel), or
        the whole job once every task has stopped."""
        if self.status not in (JobStatus.RUNNING, JobStatus.RESTARTING):
            return []
        return self._run_due_restarts(now)

    def _run_due_restarts(self, now: float) -> list[Instruction]:
        """Give the stopped subtasks of every due region a fresh attempt and schedule those
        whose inputs are ready. A region waits while a member it cancelled is CANCELING;
        members that another restart already replaced are left alone. A full restart
        waits for every task, then the job is RUNNING again."""
        def ready(pending: _PendingRestart) -> bool:
            members = (self.graph.subtasks() if pending.full
                       else (self._subtask(s) for s in pending.subtasks))
            return pending.due <= now and not any(
                member.current.state is ExecutionState.CANCELING for member in members)

        due = [p for p in self._pending_restarts if ready(p)]
        self._pending_restarts = [p for p in self._pending_restarts if p not in due]
        out: list[Instruction] = []
        if any(pending.full for pending in due):
            out.append(self._job(JobStatus.RUNNING, now))
        fresh: list[Execution] = []
        for pending in due:
            members = (without_usable_result(self.graph) if pending.full
                       else [self._subtask(s) for s in pending.subtasks])
            for subtask in members:
                previous = subtask.current
                # a pipelined output is gone with its attempt: a finished producer too
                usable = previous.has_usable_partitions and not self.pipelined
                if not (previous.state.is_terminal and not usable):
                    continue
                self.splits.return_splits(subtask.vertex_id, subtask.subtask)
                execution = self.graph.new_attempt(subtask)
                execution.state_timestamps[ExecutionState.CREATED] = now
                fresh.append(execution)
                out.append(NewAttempt(execution.attempt_id, execution.vertex_id,
                                      execution.subtask, execution.attempt,
                                      previous.attempt_id, now))
        for execution in fresh:
            if self.pipelined or self.graph.inputs_available(execution.vertex_id):
                out += self._schedule(execution, now)
        return out

    def cancel(self, now: float) -> list[Instruction]:
        """The user cancels the job: stop every task, then the job is CANCELED."""
        if self.status.is_terminal or self.status is JobStatus.CANCELLING:
            return []
        if self.status is JobStatus.CREATED:
            out: list[Instruction] = [self._move(execution, ExecutionState.CANCELED, now)
                                      for execution in self.graph.current_executions()
                                      if not execution.state.is_terminal]
            return [*out, self._job(JobStatus.CANCELED, now), JobCanceled(0.0)]
        self._pending_restarts.clear()
        out = [self._job(JobStatus.CANCELLING, now),
               *self._cancel(self.graph.current_executions(), now)]
        return out + self._terminate_if_quiet(now)

    def fail_job(self, failure: TaskFailure, now: float) -> list[Instruction]:
        """The job fails as a whole, not through one attempt's failure (a streaming job
        whose checkpoints keep failing): the failure is its root cause, recorded against
        its first current attempt; every task is cancelled and the job FAILS once they
        have stopped, without a restart (the same checkpoints would fail again)."""
        if self.status.is_terminal or self.status in (JobStatus.FAILING, JobStatus.CANCELLING):
            return []
        first = next(iter(self.graph.current_executions()), None)
        if first is None:
            return []
        record_failure(self.graph, first, failure, now)
        self._pending_restarts.clear()
        out = [self._job(JobStatus.FAILING, now),
               *self._cancel(self.graph.current_executions(), now)]
        return out + self._terminate_if_quiet(now)

    def slots_overdue(self, now: float, timeout: float) -> list[Instruction]:
        """Pipelined: the job runs only once every subtask holds a slot. When one has
        waited longer than ``timeout`` the cluster has too few free slots, and the job
        fails saying so (Flink's NoResourceAvailableException after
        ``slot.request.timeout``) instead of holding the slots it got for ever."""
        if not self.pipelined or self.status is not JobStatus.RUNNING:
            return []
        waiting = self._slots.still_waiting()
        if not waiting:
            return []
        since = min(e.state_timestamps.get(ExecutionState.SCHEDULED, now) for e in waiting)
        if now - since < timeout:
            return []
        total = sum(vertex.parallelism for vertex in self.graph.vertices.values())
        return self.fail_job(TaskFailure("NoResourceAvailable", (
            f"{len(waiting)} of the job's {total} subtasks got no slot within {timeout:g} s "
            f"(jobmanager.slot-request-timeout): a streaming job runs only with a slot for "
            f"every subtask at once, and the cluster has too few free ones")), now)

    # -- what follows a finished or failed task --------------------------------------------

    def _after_finished(self, execution: Execution, now: float) -> list[Instruction]:
        if self.status is not JobStatus.RUNNING:
            return self._terminate_if_quiet(now)
        out: list[Instruction] = []
        for consumer in self.graph.consumers_of(execution.vertex_id):
            out += self._schedule_consumers(consumer, now)
        return out + self._finish_if_done(now)

    def _finish_if_done(self, now: float) -> list[Instruction]:
        if not self.graph.all_finished():
            return []
        results = {subtask.id: subtask.current.result for subtask in self.graph.subtasks()
                   if subtask.current.result is not None}
        return [self._job(JobStatus.FINISHED, now), JobFinished(self._duration(now), results)]

    def _schedule_consumers(self, vertex: ExecutionJobVertex,
                            now: float) -> list[Instruction]:
        """Flink's ScheduleOrUpdateConsumers for a blocking exchange: once all inputs of
        ``vertex`` are complete, schedule its subtasks that still wait."""
        if not self.graph.inputs_available(vertex.id):
            return []
        waiting = [s.current for s in vertex.subtasks
                   if s.current.state is ExecutionState.CREATED]
        if not waiting:
            return []
        producers = tuple(dict.fromkeys(edge.source for edge in vertex.inputs))
        out: list[Instruction] = [ScheduleOrUpdateConsumers(vertex.id, producers)]
        for execution in waiting:
            out += self._schedule(execution, now)
        return out

    def _after_failures(self, subtask_ids: list[str], now: float) -> list[Instruction]:
        """One failure event: restart the failover region after the backoff, or give up."""
        if self.status is not JobStatus.RUNNING:
            return self._terminate_if_quiet(now)
        if not self.restart_strategy.can_restart(now):
            self._pending_restarts.clear()
            out = [self._job(JobStatus.FAILING, now),
                   *self._cancel(self.graph.current_executions(), now)]
            return out + self._terminate_if_quiet(now)
        if self.failover == "full":
            return self._restart_everything(subtask_ids, now)
        failed = [self._subtask(subtask_id) for subtask_id in subtask_ids]
        region = pipelined_region(self.graph, failed) if self.pipelined \
            else failover_region(self.graph, failed)
        delay = self.restart_strategy.backoff()
        region_ids = tuple(subtask.id for subtask in region)
        self._pending_restarts.append(_PendingRestart(now + delay, region_ids))
        failed_attempts = tuple(subtask.current.attempt_id for subtask in failed)
        out: list[Instruction] = [ScheduleRestart(delay, now + delay, region_ids,
                                                  failed_attempts)]
        return out + self._cancel((subtask.current for subtask in region), now)

    def _restart_everything(self, subtask_ids: list[str], now: float) -> list[Instruction]:
        """Full failover: the job goes RESTARTING and every task still running is
        cancelled; the restart runs once all have stopped and the backoff has passed."""
        delay = self.restart_strategy.backoff()
        self._pending_restarts.append(_PendingRestart(now + delay, (), full=True))
        rerun = tuple(subtask.id for subtask in without_usable_result(self.graph))
        failed_attempts = tuple(self._subtask(s).current.attempt_id for s in subtask_ids)
        out: list[Instruction] = [self._job(JobStatus.RESTARTING, now),
                                  ScheduleRestart(delay, now + delay, rerun, failed_attempts)]
        return out + self._cancel(self.graph.current_executions(), now)

    def _cancel(self, executions: Iterable[Execution], now: float) -> list[Instruction]:
        """Stop executions that have not stopped: at once if they never reached a
        TaskManager, by a CancelAttempt otherwise."""
        out: list[Instruction] = []
        for execution in executions:
            if execution.state in (ExecutionState.CREATED, ExecutionState.SCHEDULED):
                out.append(self._move(execution, ExecutionState.CANCELED, now))
                out += self._release(execution)  # a slot held for a pipelined deployment
            elif execution.state in _ON_A_TASKMANAGER:
                assert execution.taskmanager_id is not None
                out.append(self._move(execution, ExecutionState.CANCELING, now))
                out.append(CancelAttempt(execution.attempt_id, execution.taskmanager_id))
        return out

    def _cancelled(self, execution: Execution, now: float) -> list[Instruction]:
        """A cancel is confirmed: the job may end, or a restart waiting for it may run."""
        out = [self._move(execution, ExecutionState.CANCELED, now), *self._release(execution)]
        if self.status in (JobStatus.RUNNING, JobStatus.RESTARTING):
            return out + self._run_due_restarts(now)
        return out + self._terminate_if_quiet(now)

    def _terminate_if_quiet(self, now: float) -> list[Instruction]:
        """FAILING or CANCELLING ends once every current attempt has stopped."""
        if self.status not in (JobStatus.FAILING, JobStatus.CANCELLING):
            return []
        if not self.graph.all_stopped():
            return []
        if self.status is JobStatus.CANCELLING:
            return [self._job(JobStatus.CANCELED, now), JobCanceled(self._duration(now))]
        root_cause = self.graph.root_cause
        assert root_cause is not None, "a job fails only after a recorded failure"
        return [self._job(JobStatus.FAILED, now), JobFailed(self._duration(now), root_cause)]

    # -- small steps -----------------------------------------------------------------------

    def _schedule(self, execution: Execution, now: float) -> list[Instruction]:
        changed = self._move(execution, ExecutionState.SCHEDULED, now)
        self._slots.wait_for_slot(execution)
        return [changed, AllocateSlot(execution.attempt_id, execution.vertex_id,
                                     execution.subtask)]

    def _fail(self, execution: Execution, failure: TaskFailure,
              now: float) -> list[Instruction]:
        execution.failure = record_failure(self.graph, execution, failure, now)
        return [self._move(execution, ExecutionState.FAILED, now)]

    def _release(self, execution: Execution) -> list[Instruction]:
        slot = self._slots.unhold(execution)
        return [] if slot is None else [ReleaseSlot(slot)]

    def _move(self, execution: Execution, new: ExecutionState,
              now: float) -> ExecutionStateChanged:
        old = execution.transition(new, now)
        self.graph.moved(execution, old, new)
        failure = execution.failure if new is ExecutionState.FAILED else None
        return ExecutionStateChanged(execution.attempt_id, execution.vertex_id,
                                     execution.subtask, execution.attempt, old, new, now,
                                     failure)

    def _job(self, new: JobStatus, now: float) -> JobStatusChanged:
        return JobStatusChanged(self.graph.transition(new, now), new, now)

    def _current(self, attempt_id: str) -> Execution | Rejected:
        """The attempt, if it is its subtask's current one; otherwise why not."""
        execution = self.graph.execution(attempt_id)
        if execution is None:
            parsed = parse_attempt_id(attempt_id)
            if (parsed is not None and parsed.job_id == self.graph.job_id
                    and parsed.epoch < self.graph.epoch):
                return Rejected(attempt_id, f"stale attempt {attempt_id}: from epoch "
                                            f"{parsed.epoch}, the job now runs epoch "
                                            f"{self.graph.epoch}")
            return Rejected(attempt_id, f"unknown attempt {attempt_id}")
        if not self.graph.is_current(execution):
            current = self._subtask(execution.subtask_id).current
            return Rejected(attempt_id, f"stale attempt {attempt_id}: replaced by "
                                        f"{current.attempt_id}")
        return execution

    def _subtask(self, subtask_id: str) -> ExecutionVertex:
        return self.graph.subtask(*parse_subtask_id(subtask_id))

    def _duration(self, now: float) -> float:
        return now - self._started_at if self._started_at is not None else 0.0
