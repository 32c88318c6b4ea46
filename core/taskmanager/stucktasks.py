"""Tasks that overrun their timeout: cancel the Spark work, then interrupt, then give up.

A task past its deployment's ``task_timeout`` fails with TaskTimeoutError and its Spark
work is cancelled. If its thread still runs ``STUCK_GRACE / 2`` later (stuck in user
code), it is interrupted; if it runs on after another ``STUCK_GRACE / 2``, the task
cannot be stopped: its end is reported, and this TaskManager exits so that its
supervisor starts a healthy one.

Main thread of the TaskExecutor only (``Endpoint``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from clusterdeck.core.node import exitcodes
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.taskmanager.attemptlogs import AttemptLogHandler
from clusterdeck.core.taskmanager.endpoint import Endpoint
from clusterdeck.core.taskmanager.tasks import Task, TaskOutcome

log = logging.getLogger(__name__)

STUCK_GRACE = 10.0  # seconds from cancel to interrupt to giving up on the process


class StuckTasks:
    """``running(attempt_id)``: the task running under that attempt now, if any;
    ``ended(task, outcome)``: reports a task given up on as ended."""

    def __init__(self, endpoint: Endpoint, logs: AttemptLogHandler,
                 running: Callable[[str], Task | None],
                 ended: Callable[[Task, TaskOutcome], None]) -> None:
        self._endpoint = endpoint
        self._logs = logs
        self._running = running
        self._ended = ended

    def watch(self, task: Task) -> None:
        """``task`` began: it fails once past its timeout (none when 0)."""
        timeout = task.deployment.task_timeout
        if timeout > 0:
            self._endpoint.schedule(timeout, self._overdue, task)

    def _overdue(self, task: Task) -> None:
        if self._running(task.attempt_id) is not task:
            return
        timeout = task.deployment.task_timeout
        log.warning("attempt %s exceeded its timeout of %g s: cancelling", task.attempt_id,
                    timeout)
        task.fail(TaskFailure("TaskTimeoutError",
                              f"the task ran longer than its timeout of {timeout:g} s",
                              log_excerpt=self._logs.excerpt(task.attempt_id)))
        self._endpoint.schedule(STUCK_GRACE / 2, self._interrupt, task)

    def _interrupt(self, task: Task) -> None:
        if not task.alive:
            return
        log.warning("attempt %s ignores its cancel: interrupting its thread", task.attempt_id)
        task.interrupt()
        self._endpoint.schedule(STUCK_GRACE / 2, self._give_up, task)

    def _give_up(self, task: Task) -> None:
        if not task.alive:
            return
        log.critical("attempt %s cannot be stopped: this TaskManager is unhealthy and exits "
                     "so that its supervisor restarts it", task.attempt_id)
        self._ended(task, TaskOutcome(ExecutionState.FAILED, failure=task.failure))
        self._endpoint.schedule(1.0, os._exit, exitcodes.UNHEALTHY)
