"""One task: one attempt of one subtask, run on its slot's thread (slotworkers.py).

The thread waits for the TaskManager's SparkSession and the job's artifact, runs the
subtask through ``clusterdeck.core.taskmanager.runner`` and hands its outcome back to the
TaskExecutor's main thread; it never touches the TaskExecutor's state itself.
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import logging
import queue
import threading
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from clusterdeck.core.engine.cancellation import cancel_subtask
from clusterdeck.core.engine.liveoutput import LiveOutput
from clusterdeck.core.engine.mqttparts import ClusterBroker
from clusterdeck.core.engine.sparkstatus import with_spark_cause
from clusterdeck.core.engine.sparkwatch import SparkWatch
from clusterdeck.core.engine.tally import LiveCounts
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.failures import TaskFailure, unreachable_ids
from clusterdeck.core.protocol.jobgraph import InputSplit, JobKind
from clusterdeck.core.protocol.sparkwork import SparkWork
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.streaming.network import ChannelServer
from clusterdeck.core.taskmanager.attemptlogs import AttemptLogHandler, thread_name
from clusterdeck.core.taskmanager.slotworkers import SlotWorker
from clusterdeck.core.taskmanager.sparkhealth import (
    LOST_JVM_GRACE,
    SparkJvm,
    looks_like_lost_jvm,
)

log = logging.getLogger(__name__)
MAX_CAUSES = 20  # links of an exception's chain looked through for an unreachable peer
# An attempt's routine steps (starting, each split, finished) go to the attempt's own log
# (and its failure excerpt) only (AttemptLogHandler.step): written to the process log as
# well, they cost a quarter of a 2,000-subtask job's throughput (benchmarks.md, section 4).


class TaskCanceled(Exception):
    """The task was canceled while it ran."""


@dataclass(frozen=True)
class TaskOutcome:
    state: ExecutionState  # FINISHED, FAILED or CANCELED
    result: p.TaskResult | None = None
    failure: TaskFailure | None = None


SplitSource = Callable[[int], InputSplit | None]  # the request's sequence number -> split


def _no_checkpoint_reports(_message: Any) -> None:
    """A batch task takes no snapshots: it has no checkpoint to report."""


@dataclass(frozen=True)
class TaskServices:
    """What a task uses of its TaskManager, all given when the task is built.

    ``spark`` and ``job``: the SparkSession and the job's artifact, waited for on the slot
    thread; ``next_split``: asks the JobMaster for the next input split (slot thread);
    ``logs``: the attempt logs; ``report_checkpoint``: hands a streaming task's
    acknowledgement or decline to the main thread, for its JobMaster; ``channels``: the
    TaskManager's stream channel server (streaming tasks); ``broker``: the cluster's
    broker with this TaskManager's login (MQTT sources and sinks)."""

    spark: Future[Any]
    job: Future[LoadedJob]
    next_split: SplitSource
    logs: AttemptLogHandler
    report_checkpoint: Callable[[Any], None] = _no_checkpoint_reports
    channels: ChannelServer | None = None
    broker: ClusterBroker | None = None
    follow_spark: bool = True  # a script's Spark work followed (taskmanager.spark-work.follow)


Runner = Callable[[Any, LoadedJob, p.SubmitTask, "Task"], p.TaskResult]


class Task:
    def __init__(self, deployment: p.SubmitTask, services: TaskServices, runner: Runner,
                 on_done: Callable[[Task, TaskOutcome], None]) -> None:
        self.deployment = deployment
        self.attempt_id = deployment.attempt_id
        self.services = services
        self._spark = services.spark
        self._job = services.job
        self._next_split = services.next_split
        self._runner = runner
        self._logs = services.logs
        self._on_done = on_done
        self.canceled = threading.Event()
        # A streaming task's checkpoint messages, put by the main thread.
        self.checkpoint_control: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.live = LiveOutput()  # what a script prints, taken by the main thread
        self.counts = LiveCounts()  # records and bytes so far, read by the main thread
        # A script's Spark jobs, polled on the TaskManager's Spark-work thread while it runs
        # and on this task's thread when it ends (final_spark_work, read by the main thread).
        self.spark_watch = SparkWatch(lambda: self._spark.result().sparkContext,
                                      self.attempt_id) \
            if deployment.graph.kind is JobKind.PYSPARK_SCRIPT and services.follow_spark \
            else None
        self.final_spark_work: SparkWork | None = None
        # Set when the TaskExecutor fails it (a timeout, a dead Spark JVM): the cause to
        # report, whatever the slot thread then raises.
        self.failure: TaskFailure | None = None
        self.worker: SlotWorker | None = None  # the slot's thread it was handed to
        self.used_spark = True  # the runner says otherwise for an attempt that made no Spark call
        self.retire_thread = True  # its thread is not reused (see slotworkers.py)
        self._claims = itertools.count()  # next() is atomic: the first caller owns the run
        self._started = False
        self._ended = False

    def start(self, worker: SlotWorker | None = None) -> None:
        """Main thread: run on ``worker``'s thread after what it was handed before (on a
        thread of its own without one)."""
        (worker or SlotWorker(-1)).hand(self)

    @property
    def spark_ready(self) -> bool:
        return self._spark.done() and self._spark.exception() is None

    @property
    def handed(self) -> bool:
        return self.worker is not None

    def claim(self) -> bool:
        """True once, for whoever ends the task: its slot's thread, which runs it, or the
        main thread, which ends it unstarted when it is cancelled before its turn."""
        return next(self._claims) == 0

    def run_here(self) -> None:
        """The slot's thread, after claiming it."""
        threading.current_thread().name = thread_name(self.attempt_id)
        self._started = True
        self._run()

    def end_unstarted(self) -> None:
        """Main thread, after claiming it: a task cancelled or failed before its turn
        ends as it was told, without waiting for the task ahead of it."""
        self._on_done(self, self._failed(TaskCanceled(self.attempt_id)))

    def cancel(self) -> None:
        """Called on the TaskExecutor's main thread: stop the Spark work of this attempt.

        Cancelling Spark jobs is a Py4J call, which blocks for as long as the JVM does not
        answer, so it runs on a thread of its own and the main thread never waits."""
        self.canceled.set()
        if self._spark.done() and self._spark.exception() is None:
            threading.Thread(target=self._cancel_spark_jobs, args=(self._spark.result(),),
                             name=f"cancel:{self.attempt_id}", daemon=True).start()

    def fail(self, failure: TaskFailure) -> None:
        """Main thread: end the attempt with ``failure`` as its cause, whatever its thread
        raises once its Spark work stops; a cause given earlier stays."""
        if self.failure is None:
            self.failure = failure
        self.cancel()

    def _cancel_spark_jobs(self, spark: Any) -> None:
        jvm = SparkJvm.of(spark)
        if jvm is not None and jvm.exit() is not None:
            return  # the attempt's Spark jobs died with the JVM; there is nothing to ask
        try:  # also keeps the attempt from starting new Spark jobs
            cancel_subtask(spark, self.attempt_id)
        except Exception:  # a stopping JVM: the task thread ends anyway
            log.exception("cancelling the Spark jobs of %s", self.attempt_id)

    def splits(self) -> Iterator[InputSplit]:
        """The source's input splits: those its deployment gave, or pulled one at a time
        from the JobMaster."""
        given = iter(self.deployment.splits) if self.deployment.splits_given else None
        for sequence in itertools.count():
            if self.canceled.is_set():
                raise TaskCanceled(self.attempt_id)
            split = self._next_split(sequence) if given is None else next(given, None)
            if split is None:
                return
            self._logs.step(self.attempt_id, f"reading input split {split.split_id} "
                            f"({split.path or f'part {split.part} of {split.parts}'})")
            yield split

    def _run(self) -> None:
        deployment = self.deployment
        self._logs.step(self.attempt_id, f"attempt {self.attempt_id} of "
                        f"{deployment.vertex_id} subtask {deployment.subtask} starting")
        try:
            if self.canceled.is_set():  # cancelled while deployed ahead: never waits
                raise TaskCanceled(self.attempt_id)
            spark = self._spark.result()
            job = self._job.result()
            if self.canceled.is_set():
                raise TaskCanceled(self.attempt_id)
            result = self._runner(spark, job, deployment, self)
            outcome = TaskOutcome(ExecutionState.FINISHED, result=result)
            self._logs.step(self.attempt_id, f"attempt {self.attempt_id} finished")
        except BaseException as error:
            outcome = self._failed(error)
        outcome = self._with_spark_work(outcome)
        self._logs.ended(self.attempt_id, finished=outcome.state is ExecutionState.FINISHED)
        self.retire_thread = outcome.state is not ExecutionState.FINISHED or self.used_spark
        self._ended = True
        self._on_done(self, outcome)

    def _with_spark_work(self, outcome: TaskOutcome) -> TaskOutcome:
        """Slot thread: a script's last Spark work, and a failure that struck in a Spark
        task named by its stage, task and Spark's error (``sparkstatus.spark_cause``)."""
        if self.spark_watch is None or not self.spark_ready or self.failure is not None:
            return outcome
        self.final_spark_work = work = self.spark_watch.poll()
        if outcome.failure is None:
            return outcome
        return dataclasses.replace(outcome, failure=dataclasses.replace(
            outcome.failure, message=with_spark_cause(outcome.failure.message, work)))

    def interrupt(self) -> None:
        """Raise TaskCanceled inside the slot thread at its next Python instruction: the
        step after cancelling the Spark work, for a task stuck in user code."""
        worker = self.worker
        if worker is None:
            return
        worker.retire = True  # before reading ``current``: see SlotWorker._loop
        ident = worker.ident
        if worker.current is self and ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                                       ctypes.py_object(TaskCanceled))

    @property
    def alive(self) -> bool:
        """Started on its slot's thread and not ended yet."""
        return self._started and not self._ended

    def _failed(self, error: BaseException) -> TaskOutcome:
        text = getattr(error, "traceback_text", "") or "".join(
            traceback.format_exception(error))
        jvm_died = self._spark_died(error, text)
        # Read after the JVM check: the TaskExecutor may have failed this attempt meanwhile,
        # and its cause is the first one given.
        failure = self.failure or jvm_died
        if failure is not None:
            return TaskOutcome(ExecutionState.FAILED, failure=failure)
        if self.canceled.is_set():
            log.info("attempt %s canceled", self.attempt_id)
            return TaskOutcome(ExecutionState.CANCELED)
        log.error("attempt %s failed: %s: %s", self.attempt_id, type(error).__name__, error)
        user_type = getattr(error, "exception_type", type(error).__name__)
        return TaskOutcome(ExecutionState.FAILED, failure=TaskFailure(
            user_type, getattr(error, "user_message", str(error)), text,
            self._logs.excerpt(self.attempt_id),
            lost_producers=tuple(getattr(error, "lost_producers", ())),
            unreachable=_unreachable(error),
            exit_code=getattr(error, "exit_code", None),
            stdout_path=getattr(error, "stdout_path", ""),
            stderr_path=getattr(error, "stderr_path", "")))

    def _spark_died(self, error: BaseException, text: str) -> TaskFailure | None:
        """Slot thread: the failure "the Spark JVM died" when the attempt failed because it
        did, so the cause reported is the JVM and not only a Py4J connection error. The
        JVM's sockets close a moment before it can be seen dead: after a lost connection
        the thread waits for that up to ``LOST_JVM_GRACE``."""
        if not self._spark.done() or self._spark.exception() is not None:
            return None
        jvm = SparkJvm.of(self._spark.result())
        if jvm is None:
            return None
        ended = jvm.wait_for_exit(LOST_JVM_GRACE if looks_like_lost_jvm(error) else 0.0)
        if ended is None:
            return None
        log.error("attempt %s failed: %s", self.attempt_id, ended)
        return ended.failure(text, self._logs.excerpt(self.attempt_id))


def _unreachable(error: BaseException) -> tuple[str, ...]:
    """The TaskManagers the error or one of its causes found unreachable (a partition's
    fetch, a stream channel's connection), for the job to block a while."""
    seen: list[str] = []
    cause: BaseException | None = error
    for _ in range(MAX_CAUSES):
        if cause is None:
            break
        seen.extend(str(t) for t in getattr(cause, "unreachable", ()))
        cause = cause.__cause__ or cause.__context__
    return unreachable_ids(seen)
