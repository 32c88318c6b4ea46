"""Whether the TaskManager's Spark JVM still runs, asked without Py4J.

PySpark starts its JVM as a child of this process (``spark-submit`` execs into ``java``)
and keeps the ``Popen`` on its gateway. A JVM that died (killed, out of memory, crashed)
leaves a SparkSession whose every call fails, so every attempt given to it would fail
too. Asking the process costs one non-blocking ``waitpid`` and no Py4J call: a Py4J call
blocks for as long as the JVM does not answer, which must never happen on an endpoint's
main thread.
"""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from clusterdeck.core.protocol.failures import TaskFailure

SPARK_DIED = "SparkDied"
"""``exception_type`` of the failure given to attempts whose Spark JVM died under them."""

LOST_JVM_GRACE = 2.0
"""Seconds a slot thread waits for a JVM to be seen dead after a Py4J connection error:
the JVM's sockets close a moment before its process can be reaped."""

# What a Py4J call raises, or a script's traceback shows, when the JVM went away.
_LOST_CONNECTION_SIGNS = ("Py4JNetworkError", "ConnectionRefusedError",
                          "ConnectionResetError", "BrokenPipeError",
                          "Answer from Java side is empty")


@dataclass(frozen=True)
class JvmExit:
    """How a Spark JVM ended: its pid and ``Popen.returncode`` (negative: a signal)."""

    pid: int
    returncode: int

    @property
    def how(self) -> str:
        if self.returncode < 0:
            number = -self.returncode
            try:
                return f"killed by signal {number} ({signal.Signals(number).name})"
            except ValueError:
                return f"killed by signal {number}"
        return f"exited with code {self.returncode}"

    def __str__(self) -> str:
        return f"the TaskManager's Spark JVM (pid {self.pid}) died: {self.how}"

    def failure(self, traceback: str = "", log_excerpt: tuple[str, ...] = ()) -> TaskFailure:
        return TaskFailure(SPARK_DIED, str(self), traceback, log_excerpt)


class SparkJvm:
    """The JVM process behind one SparkSession. Any thread may ask; ``Popen.poll`` takes its
    lock without waiting, so two threads asking at once never block each other."""

    def __init__(self, process: subprocess.Popen[Any]) -> None:
        self._process = process
        self.pid = process.pid

    @classmethod
    def of(cls, spark: Any) -> SparkJvm | None:
        """The JVM of a SparkSession or SparkContext; None when it is not this process's
        child (a gateway handed over in ``PYSPARK_GATEWAY_PORT``), whose health cannot be
        watched. Attribute reads only, no Py4J. PySpark keeps its gateway in a class
        attribute, so ask right after the session started: after a restart every old
        session points at the new JVM."""
        context = getattr(spark, "sparkContext", spark)
        process = getattr(getattr(context, "_gateway", None), "proc", None)
        return cls(process) if isinstance(process, subprocess.Popen) else None

    def exit(self) -> JvmExit | None:
        """None while the JVM runs; once it has ended, how."""
        returncode = self._process.poll()
        return None if returncode is None else JvmExit(self.pid, returncode)

    def wait_for_exit(self, timeout: float) -> JvmExit | None:
        """Blocking up to ``timeout`` seconds (a slot thread only): how the JVM ended, or None
        if it still runs at the deadline."""
        deadline = time.monotonic() + timeout
        while (ended := self.exit()) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return ended


def looks_like_lost_jvm(error: BaseException) -> bool:
    """Whether an attempt's error, or an error it was raised from, is a lost connection to
    the JVM (a PySpark script's failure carries only its traceback's text)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = f"{type(current).__name__} {current} {getattr(current, 'traceback_text', '')}"
        if any(sign in text for sign in _LOST_CONNECTION_SIGNS):
            return True
        current = current.__cause__ or current.__context__
    return False
