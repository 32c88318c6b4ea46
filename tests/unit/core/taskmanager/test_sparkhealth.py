"""A dead Spark JVM, told apart without Py4J; and the cause a task reports when its JVM died.

A ``sleep`` child process stands in for the JVM: what is watched is a child process and
its ``Popen``, nothing of Spark.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from clusterdeck.core.jobapi.errors import SubtaskFailed
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.taskmanager.attemptlogs import AttemptLogHandler
from clusterdeck.core.taskmanager.runner import UserCodeFailure
from clusterdeck.core.taskmanager.sparkhealth import (
    SPARK_DIED,
    JvmExit,
    SparkJvm,
    looks_like_lost_jvm,
)
from clusterdeck.core.taskmanager.tasks import Task, TaskOutcome, TaskServices
from tests.waiting import wait_for

pytestmark = pytest.mark.integration  # a process stands in for the JVM


@pytest.fixture
def jvm_process() -> Iterator[subprocess.Popen[Any]]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


class ScalaContext:
    """What ``cancel_subtask`` reaches through Py4J; ``answer`` holds back its answer, as a
    JVM that does not answer would."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.cancelled_on: list[str] = []

    def cancelJobGroupAndFutureJobs(self, attempt_id: str) -> None:  # Spark's name
        self.cancelled_on.append(threading.current_thread().name)
        self.answer.wait(10)


def session_of(process: subprocess.Popen[Any] | None,
               scala: ScalaContext | None = None) -> Any:
    scala = scala or ScalaContext()
    context = SimpleNamespace(_gateway=SimpleNamespace(proc=process),
                              _jsc=SimpleNamespace(sc=lambda: scala))
    return SimpleNamespace(sparkContext=context)


def done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


def deployment() -> p.SubmitTask:
    return p.SubmitTask("job", JobGraph("j", JobKind.DATAFLOW, ()), "attempt-1", "vertex", 0,
                        1, 0, 0, "alloc", "jobmaster.job", "token", "sha", "/work")


def run(task_runner: Any, session: Any, tmp_path: Any,
        before_start: Any = None) -> TaskOutcome:
    outcomes: list[TaskOutcome] = []
    ended = threading.Event()
    services = TaskServices(done(session), done(object()), lambda _sequence: None,
                            AttemptLogHandler(tmp_path))
    task = Task(deployment(), services, task_runner,
                lambda _task, outcome: (outcomes.append(outcome), ended.set()))
    if before_start is not None:
        before_start(task)
    task.start()
    assert ended.wait(10), "the task did not end"
    return outcomes[0]


def test_a_running_jvm_has_not_exited(jvm_process) -> None:
    assert SparkJvm(jvm_process).exit() is None


def test_a_killed_jvm_is_described_by_its_pid_and_signal(jvm_process) -> None:
    jvm = SparkJvm(jvm_process)
    jvm_process.send_signal(signal.SIGKILL)
    ended = jvm.wait_for_exit(10)
    assert ended == JvmExit(jvm_process.pid, -9)
    assert str(ended) == (f"the TaskManager's Spark JVM (pid {jvm_process.pid}) died: "
                          "killed by signal 9 (SIGKILL)")
    failure = ended.failure("trace", ("a log line",))
    assert failure == TaskFailure(SPARK_DIED, str(ended), "trace", ("a log line",))


def test_a_jvm_that_exited_is_described_by_its_exit_code() -> None:
    assert JvmExit(42, 1).how == "exited with code 1"


def test_waiting_for_a_running_jvm_to_exit_gives_up_at_the_deadline(jvm_process) -> None:
    assert SparkJvm(jvm_process).wait_for_exit(0.05) is None


def test_the_jvm_is_found_on_the_sessions_gateway_and_not_without_one(jvm_process) -> None:
    jvm = SparkJvm.of(session_of(jvm_process))
    assert jvm is not None and jvm.pid == jvm_process.pid
    assert SparkJvm.of(session_of(None)) is None  # a gateway this process did not start


def test_lost_connections_are_recognised_through_the_chain_of_causes() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as lost:
            raise RuntimeError("while calling o42.collect") from lost
    except RuntimeError as error:
        assert looks_like_lost_jvm(error)
    script = SubtaskFailed("Py4JError: An error occurred", "Traceback ...\n"
                           "py4j.protocol.Py4JNetworkError: Answer from Java side is empty\n")
    assert looks_like_lost_jvm(UserCodeFailure(script))
    assert not looks_like_lost_jvm(ValueError("record 777 is bad"))


def test_a_task_whose_jvm_died_under_it_fails_with_that_cause(jvm_process, tmp_path) -> None:
    def runner(*_args: Any) -> p.TaskResult:
        jvm_process.send_signal(signal.SIGKILL)
        raise ConnectionRefusedError(111, "Connection refused")  # as Py4J raises it

    outcome = run(runner, session_of(jvm_process), tmp_path)
    assert outcome.state is ExecutionState.FAILED
    assert outcome.failure.exception_type == SPARK_DIED
    assert outcome.failure.message == (f"the TaskManager's Spark JVM (pid {jvm_process.pid}) "
                                       "died: killed by signal 9 (SIGKILL)")
    assert "ConnectionRefusedError" in outcome.failure.traceback


def test_a_task_failing_with_a_live_jvm_reports_its_own_error(jvm_process, tmp_path) -> None:
    def runner(*_args: Any) -> p.TaskResult:
        raise KeyError("no such record")

    outcome = run(runner, session_of(jvm_process), tmp_path)
    assert outcome.failure.exception_type == "KeyError"


def test_the_cause_the_taskexecutor_gives_wins_over_what_the_thread_raises(
        jvm_process, tmp_path) -> None:
    given = TaskFailure(SPARK_DIED, "the JVM died")
    proceed = threading.Event()

    def runner(*_args: Any) -> p.TaskResult:
        proceed.wait(10)
        raise ConnectionRefusedError(111, "Connection refused")

    def fail_while_running(task: Task) -> None:
        task.fail(given)
        task.fail(TaskFailure("TaskTimeoutError", "a later cause"))
        proceed.set()

    jvm_process.send_signal(signal.SIGKILL)  # dead: cancelling asks nothing of it
    outcome = run(runner, session_of(jvm_process), tmp_path, before_start=fail_while_running)
    assert outcome == TaskOutcome(ExecutionState.FAILED, failure=given)


def test_cancel_never_waits_for_the_jvm_on_the_calling_thread(jvm_process, tmp_path) -> None:
    scala = ScalaContext()  # never answers until told
    proceed = threading.Event()
    services = TaskServices(done(session_of(jvm_process, scala)), done(object()),
                            lambda _sequence: None, AttemptLogHandler(tmp_path))
    task = Task(deployment(), services, lambda *_args: proceed.wait(10),
                lambda _task, _outcome: None)
    task.start()
    task.cancel()  # returns although the JVM has not answered
    assert task.canceled.is_set()
    wait_for(lambda: scala.cancelled_on, 10, "the Spark jobs cancelled")
    assert scala.cancelled_on == ["cancel:attempt-1"]  # a thread of the cancel's own
    scala.answer.set()
    proceed.set()
