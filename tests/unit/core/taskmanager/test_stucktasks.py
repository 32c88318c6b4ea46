"""Tasks past their timeout (core/taskmanager/stucktasks.py): failed, then interrupted,
then given up on with the process."""

from __future__ import annotations

import os
from typing import Any

from clusterdeck.core.node import exitcodes
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.taskmanager.attemptlogs import AttemptLogHandler
from clusterdeck.core.taskmanager.stucktasks import STUCK_GRACE, StuckTasks
from clusterdeck.core.taskmanager.tasks import TaskOutcome
from tests.unit.core.taskmanager.helpers import FakeEndpoint, deployment


class HungTask:
    """A task whose thread never ends, whatever it is told."""

    def __init__(self, task_timeout: float) -> None:
        self.deployment = deployment(task_timeout=task_timeout)
        self.attempt_id = self.deployment.attempt_id
        self.failure: TaskFailure | None = None
        self.interrupted = False
        self.alive = True

    def fail(self, failure: TaskFailure) -> None:
        self.failure = self.failure or failure

    def interrupt(self) -> None:
        self.interrupted = True


def watched(tmp_path: Any, task: HungTask) -> tuple[FakeEndpoint, list[Any]]:
    endpoint, ended = FakeEndpoint(), []
    stuck = StuckTasks(endpoint, AttemptLogHandler(tmp_path),
                       lambda attempt_id: task if attempt_id == task.attempt_id else None,
                       lambda t, outcome: ended.append((t, outcome)))
    stuck.watch(task)  # type: ignore[arg-type]
    return endpoint, ended


def test_a_task_without_a_timeout_is_not_watched(tmp_path) -> None:
    endpoint, _ = watched(tmp_path, HungTask(task_timeout=0))
    assert endpoint.timers == []


def test_a_stuck_task_is_failed_then_interrupted_then_the_process_exits(tmp_path) -> None:
    task = HungTask(task_timeout=3)
    endpoint, ended = watched(tmp_path, task)

    assert endpoint.fire_timers() == [3]
    assert task.failure is not None and task.failure.exception_type == "TaskTimeoutError"
    assert not task.interrupted
    assert endpoint.fire_timers() == [STUCK_GRACE / 2]
    assert task.interrupted and ended == []
    assert endpoint.fire_timers() == [STUCK_GRACE / 2]

    assert ended == [(task, TaskOutcome(ExecutionState.FAILED, failure=task.failure))]
    (_delay, fn, args), = endpoint.timers
    assert fn is os._exit and args == (exitcodes.UNHEALTHY,)


def test_a_task_that_ends_after_its_cancel_is_left_alone(tmp_path) -> None:
    task = HungTask(task_timeout=3)
    endpoint, ended = watched(tmp_path, task)
    endpoint.fire_timers()
    task.alive = False  # it heeded the cancel

    endpoint.fire_timers()

    assert not task.interrupted and endpoint.timers == [] and ended == []
