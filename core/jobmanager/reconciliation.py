"""Deployment reconciliation, after Flink's ExecutionDeploymentReconciler: what a
TaskManager reports it runs, held against what the JobMaster believes it deployed there.

A final update can be lost (its sender gave up, an error dropped it): without this the
attempt would stay RUNNING and its job wait for ever. An attempt the JobMaster expects
but the TaskManager no longer reports, twice in a row, is lost; one the TaskManager runs
but the JobMaster does not know (a zombie of an earlier attempt) is to be cancelled. Pure
logic: ``ReconciliationRounds`` asks for the reports and carries out the answer, and
sees every cancel end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import Any

from clusterdeck.core.config.settings import Config
from clusterdeck.core.executiongraph import instructions as ins
from clusterdeck.core.executiongraph.execution import Execution
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.jobmanager.jobslots import JobSlots
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.gateways import TaskExecutorGateway
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.rpc import MainThread

log = logging.getLogger(__name__)
MISSES_TO_LOSE = 2  # one miss may be an update on its way; two heartbeats apart are not


@dataclass(frozen=True)
class Reconciliation:
    lost: tuple[str, ...] = ()  # expected there, reported by neither list
    unknown: tuple[str, ...] = ()  # running there, not an attempt the JobMaster has there


class DeploymentReconciler:
    """Used on the JobMaster's main thread only."""

    def __init__(self, misses_to_lose: int = MISSES_TO_LOSE) -> None:
        self.misses_to_lose = misses_to_lose
        self._misses: dict[str, int] = {}

    def reconcile(self, report: p.ExecutionReport, expected: Set[str],
                  known: Set[str]) -> Reconciliation:
        """``expected``: attempts the TaskManager confirmed (deployed or running);
        ``known``: those plus deployments it may not have received yet."""
        reported = set(report.running) | set(report.reporting)
        lost = []
        for attempt_id in expected:
            if attempt_id in reported:
                self._misses.pop(attempt_id, None)
                continue
            misses = self._misses.get(attempt_id, 0) + 1
            if misses >= self.misses_to_lose:
                self._misses.pop(attempt_id, None)
                lost.append(attempt_id)
            else:
                self._misses[attempt_id] = misses
        unknown = [a for a in report.running if a not in known]
        return Reconciliation(tuple(sorted(lost)), tuple(unknown))

    def forget(self, attempt_id: str) -> None:
        """The attempt ended: nothing more to expect of it."""
        self._misses.pop(attempt_id, None)


def live_executions(graph: ExecutionGraph) -> list[Execution]:
    """The attempts a TaskManager holds or is about to: deploying, running or canceling."""
    return [e for e in graph.current_executions()
            if e.state in (ExecutionState.DEPLOYING, ExecutionState.RUNNING,
                           ExecutionState.CANCELING)]


class ReconciliationRounds:
    """The JobMaster's heartbeat to the TaskExecutors of its attempts, and the end of
    every cancel: each ``heartbeat.interval`` a round asks every TaskManager the job uses
    for its ExecutionReport and holds it against what was deployed there (an attempt
    lost is failed, an unknown one cancelled); a cancel ends at once when the TaskExecutor
    does not run the attempt, else with its CANCELED update, else after
    ``jobmanager.cancel-timeout`` even if the TaskManager never answers.

    Used on the JobMaster's main thread only; the scheduler decides, through
    ``changed(attempt_id, state, failure)``, what a lost or cancelled attempt means."""

    def __init__(self, job_id: str, graph: ExecutionGraph, slots: JobSlots,
                 endpoint: MainThread, executor: Callable[[str], TaskExecutorGateway],
                 config: Config, running: Callable[[], bool],
                 changed: Callable[[str, ExecutionState, TaskFailure | None], None],
                 overdue: Callable[[], None]) -> None:
        """``running()``: the job's scheduler runs and it has not ended; ``overdue()``:
        the scheduler's slot requests are checked against their timeout."""
        self.job_id = job_id
        self.graph = graph
        self.slots = slots
        self._endpoint = endpoint
        self._executor = executor
        self.config = config
        self._running = running
        self._changed = changed
        self._overdue = overdue
        self._reconciler = DeploymentReconciler()
        self._reports_pending: set[str] = set()  # TaskManagers asked, not yet answered
        self._confirmed: set[str] = set()  # deployments their TaskExecutor acknowledged
        # Final updates acknowledged but applied once their files are fetched: the
        # TaskExecutor no longer lists them, and reconciliation must not take them as lost.
        self._fetching: set[str] = set()

    def confirmed(self, attempt_id: str) -> None:
        """Its TaskExecutor took the deployment: from now on it must report the attempt."""
        self._confirmed.add(attempt_id)

    def fetching(self, attempt_id: str) -> None:
        """The attempt's final update waits for its files: not lost meanwhile."""
        self._fetching.add(attempt_id)

    def fetched(self, attempt_id: str) -> None:
        self._fetching.discard(attempt_id)

    def ended(self, attempt_id: str) -> None:
        """The attempt ended: nothing more to expect of it."""
        self._confirmed.discard(attempt_id)
        self._reconciler.forget(attempt_id)

    def round(self) -> None:
        """One round, and the next one scheduled, until the job ends."""
        if not self._running():
            return
        self._overdue()
        if not self._running():
            return
        for taskmanager_id in self._taskmanagers_in_use():
            if taskmanager_id in self._reports_pending:
                continue  # no answer yet: a lost TaskManager is the ResourceManager's call
            self._reports_pending.add(taskmanager_id)
            asked = self._executor(taskmanager_id).request_execution_report(
                p.RequestExecutionReport(self.job_id), self.config["heartbeat.timeout"])
            self._endpoint.on_main_thread(asked, lambda report, _error, tm=taskmanager_id:
                                          self._reported(tm, report))
        self._endpoint.schedule(self.config["heartbeat.interval"], self.round)

    def cancel(self, cancel: ins.CancelAttempt) -> None:
        """Ask the TaskExecutor to cancel the attempt, and make sure the cancel ends.
        Deployments still queued must go first: the caller sends them."""
        gateway = self._executor(cancel.taskmanager_id)
        self._endpoint.on_main_thread(
            gateway.cancel_task(p.CancelTask(self.job_id, cancel.attempt_id)),
            lambda answer, _error: self._cancel_answered(cancel, answer))
        self._endpoint.schedule(self.config["jobmanager.cancel-timeout"],
                                self._cancel_overdue, cancel)

    def _cancel_answered(self, cancel: ins.CancelAttempt, answer: Any) -> None:
        if isinstance(answer, p.TaskOperationResult) and not answer.known:
            self._cancel_confirmed(cancel.attempt_id, f"TaskManager {cancel.taskmanager_id} "
                                   "no longer runs it")

    def _cancel_overdue(self, cancel: ins.CancelAttempt) -> None:
        self._cancel_confirmed(cancel.attempt_id, f"TaskManager {cancel.taskmanager_id} did "
                               "not confirm the cancel within jobmanager.cancel-timeout")

    def _cancel_confirmed(self, attempt_id: str, why: str) -> None:
        execution = self.graph.execution(attempt_id)
        if (not self._running() or execution is None
                or execution.state is not ExecutionState.CANCELING):
            return
        log.warning("job %s: %s taken as CANCELED: %s", self.job_id, attempt_id, why)
        self._changed(attempt_id, ExecutionState.CANCELED, None)

    def _taskmanagers_in_use(self) -> set[str]:
        in_use = {e.taskmanager_id for e in live_executions(self.graph) if e.taskmanager_id}
        in_use.update(self.slots.taskmanagers())
        return {tm for tm in in_use if self.slots.knows(tm)}

    def _reported(self, taskmanager_id: str, report: Any) -> None:
        self._reports_pending.discard(taskmanager_id)
        if not isinstance(report, p.ExecutionReport) or not self._running():
            return
        there = [e for e in live_executions(self.graph) if e.taskmanager_id == taskmanager_id]
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
        if execution is None or not self._running():
            return
        if execution.state is ExecutionState.CANCELING:
            self._cancel_confirmed(attempt_id, f"TaskManager {taskmanager_id} no longer runs it")
            return
        log.error("job %s: TaskManager %s no longer runs %s (%s here): its last update was "
                  "lost", self.job_id, taskmanager_id, attempt_id, execution.state)
        self._changed(attempt_id, ExecutionState.FAILED, TaskFailure(
            "UpdateLost", f"TaskManager {taskmanager_id} no longer runs this attempt and "
            f"its final update never arrived (last known state {execution.state}, "
            f"found by deployment reconciliation)"))
