"""Running an ordinary, unmodified PySpark script as a task, on a slot thread.

The script runs as ``__main__`` with ``sys.argv = [script, *args]``, like
``spark-submit script.py args``, with its stdout and stderr captured (for this thread
only, see ``capture.py``). While it runs, on its thread only:

* ``SparkSession.builder....getOrCreate()`` returns a session of the TaskManager's
  SparkContext (``newSession()``: the script's SQL settings and temporary views stay its
  own; builder options that can change at runtime are applied to it, the rest ignored);
* ``SparkContext(...)`` returns the TaskManager's running SparkContext;
* ``spark.stop()`` and ``sc.stop()`` do nothing, so the TaskManager keeps its Spark.

Its Spark jobs run in the attempt's job group, so ``cancel_subtask`` stops them. An
exception or ``sys.exit(non-zero)`` is a failure; the traceback is kept and also written
to the captured stderr, as Python would.

The script is compiled and executed directly rather than with ``runpy.run_path``:
run_path swaps ``sys.modules["__main__"]`` for the whole process while the script runs,
and two scripts on two slot threads would leave the wrong module there.
"""

from __future__ import annotations

import builtins
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from clusterdeck.core.engine.cancellation import attempt_scope
from clusterdeck.core.engine.capture import thread_io
from clusterdeck.core.jobapi.loader import forget_modules_from
from clusterdeck.core.jobapi.tracebacks import user_traceback


@dataclass(frozen=True)
class ScriptResult:
    stdout: str
    stderr: str
    exit_code: int
    traceback: str | None = None
    cancelled: bool = False

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and not self.cancelled


def run_pyspark_script(spark: SparkSession | Callable[[], SparkSession],
                       script_path: str | Path, args: Sequence[str],
                       attempt_id: str) -> ScriptResult:
    """Run the script to its end on this thread; see the module docstring."""
    owner = spark if isinstance(spark, SparkSession) else spark()
    path = Path(script_path).resolve()
    session = owner.newSession()
    with (thread_io([str(path), *map(str, args)]) as (out, err),
          _spark_shim(session),
          attempt_scope(owner.sparkContext, attempt_id, f"PySpark script {path.name}")
          as cancelled,
          _importable_from(path.parent)):
        exit_code, traceback_text = _execute(path)
        was_cancelled = cancelled()
        sys.stdout.flush()
    return ScriptResult(out.getvalue(), err.getvalue(), exit_code, traceback_text,
                        was_cancelled)


def _execute(path: Path) -> tuple[int, str | None]:
    namespace = {"__name__": "__main__", "__file__": str(path), "__builtins__": builtins,
                 "__package__": None, "__spec__": None, "__loader__": None,
                 "__cached__": None, "__doc__": None}
    try:
        code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
        exec(code, namespace)
    except SystemExit as exc:
        if exc.code is None or exc.code == 0:
            return 0, None
        if not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
        return (exc.code if isinstance(exc.code, int) else 1), user_traceback(exc, path.parent)
    except Exception as exc:
        text = user_traceback(exc, path.parent)
        sys.stderr.write(text)
        return 1, text
    return 0, None


@contextmanager
def _importable_from(folder: Path) -> Iterator[None]:
    """The script's folder first on sys.path, as ``python script.py`` has it; the modules
    it imported from there are forgotten afterwards."""
    before = set(sys.modules)
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        if str(folder) in sys.path:
            sys.path.remove(str(folder))
        forget_modules_from(folder, before)


_script = threading.local()
_shim_lock = threading.Lock()
_shim_users = 0
_originals: dict[str, Any] = {}


def _script_session() -> SparkSession | None:
    return getattr(_script, "session", None)


def _get_or_create(builder: Any) -> SparkSession:
    session = _script_session()
    if session is None:
        return _originals["getOrCreate"](builder)
    for key, value in getattr(builder, "_options", {}).items():
        with suppress(Exception):   # static settings cannot change on a running Spark
            session.conf.set(key, value)
    return session


def _session_stop(self: SparkSession) -> None:
    if _script_session() is None:
        _originals["session_stop"](self)


def _context_stop(self: SparkContext) -> None:
    if _script_session() is None:
        _originals["context_stop"](self)


def _context_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    active = SparkContext._active_spark_context
    if _script_session() is not None and active is not None:
        return active
    return object.__new__(cls)


def _context_init(self: SparkContext, *args: Any, **kwargs: Any) -> None:
    if _script_session() is not None and self is SparkContext._active_spark_context:
        return
    _originals["context_init"](self, *args, **kwargs)


def _patch() -> None:
    _originals.update(getOrCreate=SparkSession.Builder.getOrCreate,
                      session_stop=SparkSession.stop, context_stop=SparkContext.stop,
                      context_init=SparkContext.__init__,
                      context_new=SparkContext.__dict__.get("__new__"))
    SparkSession.Builder.getOrCreate = _get_or_create
    SparkSession.stop = _session_stop
    SparkContext.stop = _context_stop
    SparkContext.__init__ = _context_init
    SparkContext.__new__ = staticmethod(_context_new)


def _unpatch() -> None:
    SparkSession.Builder.getOrCreate = _originals["getOrCreate"]
    SparkSession.stop = _originals["session_stop"]
    SparkContext.stop = _originals["context_stop"]
    SparkContext.__init__ = _originals["context_init"]
    if _originals["context_new"] is not None:
        SparkContext.__new__ = _originals["context_new"]
    # Else ours stays: outside a script it is object.__new__. Deleting an assigned
    # __new__ leaves CPython calling object.__new__ with the constructor's arguments,
    # which raises, so the next SparkContext (a TaskManager restarting Spark after its
    # JVM died) could not be made.
    _originals.clear()


@contextmanager
def _spark_shim(session: SparkSession) -> Iterator[None]:
    """The patches of the module docstring: installed while any script runs, active only
    on the threads running one."""
    global _shim_users
    with _shim_lock:
        if _shim_users == 0:
            _patch()
        _shim_users += 1
    _script.session = session
    try:
        yield
    finally:
        _script.session = None
        with _shim_lock:
            _shim_users -= 1
            if _shim_users == 0:
                _unpatch()
