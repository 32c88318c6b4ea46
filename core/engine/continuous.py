"""How a streaming subtask's batches reach Spark: one long-lived Spark task per attempt
(Spark's continuous processing runs one long task per partition), not a Spark job per
batch (docs/streaming.md, "How a batch runs").

``ContinuousWorker`` starts, as the attempt starts, a Spark job of one partition
(``parallelize([spec], 1).mapPartitions(serve)``) in the attempt's job group, on a thread
of its own; its Python worker connects back over a Unix socket in a private folder,
proves itself with a random token, and runs each batch's partition function as the task
sends it (continuousworker.py). A batch costs a round trip on that socket (about a
millisecond) instead of a Spark job (tens of milliseconds; docs/benchmarks.md, "Streaming
batches in Spark"). The batch and its results never leave the machine, so a master
that is not ``local`` takes ``SparkJobs`` instead: today's Spark job per batch.

Failures, never a hang: the user's exception comes back as its traceback and fails the
task as a Spark PythonException does (``failure_of``); a worker that dies (kill -9, the
JVM gone) ends the connection or the Spark job, which every wait watches, and fails the
task naming it; the attempt's cancellation ends every wait within ``_TICK`` and the job
group's cancel ends the Spark job. ``close`` ends the Spark job by closing the
connection, and cancels the job group if it did not end within ``_END_WAIT``.

User counters: a batch's functions are pickled inside ``BatchCounters``, which binds each
Counter to a ``BatchCounter`` that counts into the batch's outcome; the runner adds the
counts up per attempt (``counters``).

Everything here but the Spark job's thread runs on the task's slot thread.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

from pyspark import cloudpickle
from pyspark.util import InheritableThread

from clusterdeck.core.engine.cancellation import is_cancelled
from clusterdeck.core.engine.continuousworker import (
    BatchFailed,
    BatchOutcome,
    Hello,
    OneBatch,
    WorkerSpec,
    receive_frame,
    send_frame,
    serve,
)
from clusterdeck.core.engine.streamfunctions import BatchCounter, PartitionFunction
from clusterdeck.core.jobapi.counters import CounterScope
from clusterdeck.core.jobapi.errors import SubtaskCancelled

_TICK = 0.2          # seconds between two looks at the worker's liveness while waiting
_START_WAIT = 120.0  # seconds for the long-lived Spark task's worker to connect
_FRAME_WAIT = 60.0   # seconds for the rest of a frame once it began, or for a send
_END_WAIT = 10.0     # seconds for the Spark job to end after the connection closed
_SOCKET = "worker.sock"
_SOCKET_PATH_MAX = 100  # bytes of a Unix socket's path: 108 on Linux, 104 on macOS


class WorkerLost(RuntimeError):
    """The long-lived Spark task's Python worker is gone, or never came."""


class WorkerFailed(RuntimeError):
    """The user's function raised in the worker; the message holds its traceback."""


class BatchRunner(Protocol):
    """Runs a batch's partition function in Spark, on the slot thread."""

    counters: dict[str, int | float]
    pid: int | None  # the Python worker running the batches, when one runs them all

    def start(self) -> None: ...

    def run(self, function: PartitionFunction, items: list[Any]) -> BatchOutcome: ...

    def close(self) -> None: ...


def batch_runner(spark: Any, counter_names: Iterable[str] = ()) -> BatchRunner:
    """A long-lived Spark task for a local master, else a Spark job per batch."""
    context = spark.sparkContext
    if str(context.master).startswith("local"):
        return ContinuousWorker(context, counter_names)
    return SparkJobs(context, counter_names)


class BatchCounters(CounterScope):
    """Binds the user's Counters pickled with a batch to ``BatchCounter``s (module
    docstring); ``counted`` adds a batch's counts to the attempt's totals."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        super().__init__(None)
        self.totals: dict[str, int | float] = dict.fromkeys(names, 0)

    def accumulator(self, name: str) -> Any:
        self.totals.setdefault(name, 0)
        return BatchCounter(name)

    def values(self) -> dict[str, int | float]:
        return dict(sorted(self.totals.items()))

    def counted(self, outcome: BatchOutcome) -> BatchOutcome:
        for name, amount in outcome.counters.items():
            self.totals[name] = self.totals.get(name, 0) + amount
        return outcome


class SparkJobs:
    """A Spark job per batch (``parallelize(items, 1)``, the partition function): for a
    master that is not local, where the long-lived task's socket cannot be reached."""

    def __init__(self, context: Any, counter_names: Iterable[str] = ()) -> None:
        self.context = context
        self._scope = BatchCounters(counter_names)
        self.pid: int | None = None  # each batch in whichever worker Spark picks

    @property
    def counters(self) -> dict[str, int | float]:
        return self._scope.values()

    def run(self, function: PartitionFunction, items: list[Any]) -> BatchOutcome:
        with self._scope:
            outcome = self.context.parallelize(items, 1).mapPartitions(
                OneBatch(function)).collect()
        return self._scope.counted(outcome[0])

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass


class ContinuousWorker:
    """One attempt's long-lived Spark task and the connection to its Python worker
    (module docstring). Started by ``start`` or the first ``run`` on the slot thread,
    inside the attempt's ``attempt_scope`` (the job's thread inherits its job group)."""

    def __init__(self, context: Any, counter_names: Iterable[str] = ()) -> None:
        self.context = context
        self._scope = BatchCounters(counter_names)
        self._folder: Path | None = None
        self._listener: socket.socket | None = None  # from ``start`` until it connected
        self._token = b""
        self._connection: socket.socket | None = None
        self._job: Future[Any] | None = None
        self._attempt_id: str | None = None
        self.pid: int | None = None  # the worker's process, once it connected

    @property
    def counters(self) -> dict[str, int | float]:
        return self._scope.values()

    def run(self, function: PartitionFunction, items: list[Any]) -> BatchOutcome:
        """The batch's outcome from the worker; raises WorkerFailed with the user's
        traceback, WorkerLost when the worker is gone, SubtaskCancelled once the attempt
        is cancelled."""
        connection = self._connection or self._connect()
        with self._scope:
            payload = cloudpickle.dumps((function, items))
        try:
            send_frame(connection, payload)
        except OSError as error:
            raise self._lost(f"could not be sent a batch ({error})") from error
        answer = cloudpickle.loads(self._receive(connection, None, "a batch's results"))
        if isinstance(answer, BatchFailed):
            raise WorkerFailed("a streaming function failed in Spark's Python worker:\n"
                               + answer.traceback)
        return self._scope.counted(answer)

    def close(self) -> None:
        """End the Spark job (the worker ends when its connection closes) and wait for
        it to end; cancel the attempt's job group if it did not in time. Idempotent."""
        for held in (self._listener, self._connection):
            if held is not None:
                held.close()
        self._listener = self._connection = None
        job, self._job = self._job, None
        if job is not None:
            try:
                job.exception(timeout=_END_WAIT)
            except TimeoutError:
                if self._attempt_id is not None:
                    self.context.cancelJobGroup(self._attempt_id)
                with contextlib.suppress(TimeoutError):  # a daemon thread; the job ends
                    job.exception(timeout=_END_WAIT)     # with its group
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    # -- starting -------------------------------------------------------------------------

    def start(self) -> None:
        """Listen and start the Spark job, without waiting for its worker (the first
        ``run`` takes its connection): called as the attempt starts, its Python worker
        starts while the task restores and connects. Idempotent."""
        if self._listener is not None or self._connection is not None:
            return
        self._attempt_id = self.context.getLocalProperty("spark.jobGroup.id")
        self._folder = socket_folder()
        path = str(self._folder / _SOCKET)
        self._token = secrets.token_bytes(32)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(1)
        self._job = self._submit(WorkerSpec(path, self._token))

    def _connect(self) -> socket.socket:
        """The worker's connection, once it proved itself and said hello."""
        self.start()
        assert self._listener is not None
        with self._listener:
            connection = self._accept(self._listener, self._token)
        self._listener = None
        self._connection = connection
        hello = cloudpickle.loads(self._receive(connection, time.monotonic() + _START_WAIT,
                                                "its hello"))
        assert isinstance(hello, Hello)
        self.pid = hello.pid
        return connection

    def _submit(self, spec: WorkerSpec) -> Future[Any]:
        """The long-lived Spark job, on a thread of its own (collect blocks for the
        attempt's life); its job group is the slot thread's."""
        job: Future[Any] = Future()
        context = self.context

        def body() -> None:
            try:
                job.set_result(context.parallelize([spec], 1).mapPartitions(serve).collect())
            except BaseException as error:
                job.set_exception(error)

        thread = InheritableThread(target=body, name="stream-worker-job", daemon=True)
        thread.start()
        return job

    def _accept(self, listener: socket.socket, token: bytes) -> socket.socket:
        deadline = time.monotonic() + _START_WAIT
        listener.settimeout(_TICK)
        while True:
            self._check_alive("before it connected")
            if time.monotonic() > deadline:
                raise WorkerLost(
                    f"the long-lived Spark task of this subtask did not start within "
                    f"{_START_WAIT:.0f} s: does Spark ({self.context.master}) have a core "
                    f"free for each streaming subtask of this TaskManager?")
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            connection.settimeout(_FRAME_WAIT)
            try:
                proof = receive_frame(connection)
            except OSError:
                proof = None
            if proof is not None and hmac.compare_digest(proof, token):
                return connection
            connection.close()  # not our worker: wait for ours

    # -- waiting, with a liveness check ---------------------------------------------------

    def _receive(self, connection: socket.socket, deadline: float | None, what: str) -> bytes:
        while not _readable(connection):
            self._check_alive(f"while the task waited for {what}")
            if deadline is not None and time.monotonic() > deadline:
                raise self._lost(f"sent nothing within {_START_WAIT:.0f} s ({what})")
        try:
            frame = receive_frame(connection)
        except OSError as error:
            raise self._lost(f"broke the connection ({error}) while sending {what}") \
                from error
        if frame is None:
            raise self._lost(f"closed its connection while the task waited for {what}")
        return frame

    def _check_alive(self, when: str) -> None:
        if self._attempt_id is not None and is_cancelled(self._attempt_id):
            raise SubtaskCancelled(self._attempt_id)
        if self._job is not None and self._job.done():
            raise self._lost(f"ended {when}")

    def _lost(self, what: str) -> Exception:
        """The worker is gone: name it, and Spark's reason once its job ended; or the
        attempt was cancelled, which stopped it."""
        if self._attempt_id is not None and is_cancelled(self._attempt_id):
            return SubtaskCancelled(self._attempt_id)
        job = self._job
        reason = ""
        if job is not None:
            try:
                error = job.exception(timeout=_TICK * 10)
            except TimeoutError:
                error = None
            if error is not None:
                first = str(error).strip().splitlines()
                reason = f"; Spark: {type(error).__name__}: {first[0] if first else ''}"
        who = f"(pid {self.pid}) " if self.pid is not None else ""
        return WorkerLost(f"the Spark Python worker {who}running this subtask's operators "
                          f"{what}: it died or was killed{reason}")


def _readable(connection: socket.socket) -> bool:
    """Whether a frame (or the end of the connection) came within ``_TICK``: a peek,
    which unlike ``select`` works whatever the socket's file descriptor number."""
    connection.settimeout(_TICK)
    try:
        connection.recv(1, socket.MSG_PEEK)
        return True
    except TimeoutError:
        return False
    except OSError:  # a broken connection: the read that follows says how
        return True
    finally:
        connection.settimeout(_FRAME_WAIT)


def socket_folder() -> Path:
    """A folder of this user's alone (mode 0700) for the worker's socket: in the temp
    folder, or in /tmp when the temp folder's path is too long for a Unix socket's
    (about 100 bytes: TMPDIR deep inside another folder, as a TaskManager in its own
    mount namespace has it)."""
    folder = Path(tempfile.mkdtemp(prefix="cd-stream-"))
    if len(os.fsencode(folder / _SOCKET)) <= _SOCKET_PATH_MAX or not Path("/tmp").is_dir():
        return folder
    folder.rmdir()
    return Path(tempfile.mkdtemp(prefix="cd-stream-", dir="/tmp"))
