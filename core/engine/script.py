"""Running an ordinary, unmodified PySpark script as a task, on a slot thread.

The script runs as ``__main__`` with ``sys.argv = [script, *args]``, like
``spark-submit script.py args``, with its stdout and stderr captured (for this thread
only, see ``capture.py``). ``script`` (``sys.argv[0]`` and ``__file__``) is the path the
script was submitted from when this machine sees that file, as spark-submit gives it;
else the job artifact's copy, which is the code that runs either way.

The submitter's working directory (``Submission.cwd``), when this machine sees it, is the
script's own: its thread works in it (``threadcwd.py``), so Python's relative paths
resolve there, and the relative paths it gives Spark are made absolute against it
(``sparkpaths.py``). When it is not seen, relative paths resolve against the
TaskManager's folder, as before, and the script's stderr and the attempt's log say so.
Its ``--conf`` settings are set on its session first (``scriptconf.py``). What it
leaves behind that sessions and threads share (global temporary views, caches, broadcast
variables, environment variables, its modules) is cleaned when it ends, whatever the
outcome, so the next script sees what a fresh driver would (``scriptisolation.py``).

While it runs, on its thread only:

* ``SparkSession.builder....getOrCreate()`` returns a session of the TaskManager's
  SparkContext (``newSession()``: the script's SQL settings and temporary views stay its
  own; builder options that can change at runtime are applied to it, the rest ignored);
* ``SparkContext(...)`` returns the TaskManager's running SparkContext;
* ``spark.stop()`` and ``sc.stop()`` do nothing, and ``ssc.stop(stopSparkContext=True)``
  stops the streams only, so the TaskManager keeps its Spark.

Threads the script starts count as its thread for all of this, run their Spark jobs in
its job group and print into its output; its status tracker sees its jobs only
(``scriptthreads.py``).

Its Spark jobs run in the attempt's job group, so ``cancel_subtask`` stops them. An
exception or ``sys.exit(non-zero)`` is a failure; the traceback is kept and also written
to the captured stderr, as Python would. The exit status is the one ``python script.py``
would end with (and spark-submit passes on): ``sys.exit(n)`` gives ``n`` modulo 256,
``sys.exit("text")`` prints the text and gives 1, an uncaught exception gives 1.

The script is compiled and executed directly rather than with ``runpy.run_path``:
run_path swaps ``sys.modules["__main__"]`` for the whole process while the script runs,
and two scripts on two slot threads would leave the wrong module there.
"""

from __future__ import annotations

import builtins
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from clusterdeck.core.engine import scriptisolation, scriptthreads, sparkpaths
from clusterdeck.core.engine.cancellation import attempt_scope
from clusterdeck.core.engine.capture import bound_to_this_thread, thread_io
from clusterdeck.core.engine.liveoutput import LiveOutput
from clusterdeck.core.engine.scriptconf import SparkConfError, apply_settings
from clusterdeck.core.engine.threadcwd import thread_working_directory
from clusterdeck.core.jobapi.tracebacks import user_traceback

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class Submission:
    """Where a script was submitted from: its path and the working directory there (""
    when not known: a script run in this process, an older client), and its --conf
    settings."""

    script: str = ""
    cwd: str = ""
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Placement:
    """Where the script runs on this machine: its name (argv[0], __file__), the folder
    its thread works in and the one its Spark paths resolve against (None: as before),
    and the warnings to show when the submitter's folder cannot be used."""

    file: str
    folder: str | None
    spark_base: str | None
    warnings: tuple[str, ...] = ()


def run_pyspark_script(spark: SparkSession | Callable[[], SparkSession],
                       script_path: str | Path, args: Sequence[str], attempt_id: str,
                       submission: Submission = Submission(),
                       live: LiveOutput | None = None) -> ScriptResult:
    """Run the script to its end on this thread; see the module docstring. ``live``:
    where its output goes as it is printed, too."""
    owner = spark if isinstance(spark, SparkSession) else spark()
    path = Path(script_path).resolve()
    session = owner.newSession()
    place = _placement(path, submission, owner.sparkContext)
    with (thread_io([place.file, *map(str, args)], live) as (out, err),
          _spark_shim(session, place.spark_base),
          scriptisolation.isolated(session, lambda warning: _warn([warning])),
          attempt_scope(owner.sparkContext, attempt_id, f"PySpark script {path.name}")
          as (cancelled, _group),
          scriptisolation.importable_from(path.parent),
          _working_in(place.folder) as moved):
        _warn(place.warnings + moved)
        exit_code, traceback_text = _configure_and_execute(session, submission.conf, path,
                                                           place.file)
        was_cancelled = cancelled()
        sys.stdout.flush()
    return ScriptResult(out.getvalue(), err.getvalue(), exit_code, traceback_text,
                        was_cancelled)


def _placement(path: Path, submission: Submission, context: SparkContext) -> _Placement:
    file = submission.script if submission.script and os.path.isfile(submission.script) \
        else str(path)
    folder = submission.cwd
    if not folder:
        return _Placement(file, None, None)
    if not (os.path.isdir(folder) and os.access(folder, os.R_OK | os.X_OK)):
        return _Placement(file, None, None, (
            f"the working directory it was submitted from, {folder}, is not readable on "
            f"this TaskManager: relative paths resolve against the TaskManager's folder, "
            f"{os.getcwd()}",))
    return _Placement(file, folder, folder if sparkpaths.resolves_locally(context) else None)


@contextmanager
def _working_in(folder: str | None) -> Iterator[tuple[str, ...]]:
    """This thread in ``folder`` (None: where it is), in a working directory of its own
    either way, so an ``os.chdir`` of the script moves no other thread; yields the warning
    when it cannot be in ``folder``. Where threads cannot have their own directory, the
    process is put back where it was when the script ends."""
    with ExitStack() as stack:
        stack.callback(_back_to, os.getcwd())
        problem: tuple[str, ...] = ()
        try:
            stack.enter_context(thread_working_directory(folder or os.getcwd()))
        except OSError as error:
            if folder is not None:
                problem = (f"this TaskManager cannot run the script in {folder} ({error}): "
                           "Python's relative paths resolve against the TaskManager's "
                           f"folder, {os.getcwd()}",)
        yield problem


def _back_to(folder: str) -> None:
    if os.getcwd() != folder:
        os.chdir(folder)


def _warn(warnings: Sequence[str]) -> None:
    """To the script's stderr, where the submitter sees it, and to the attempt's log."""
    for warning in warnings:
        print(f"clusterdeck: warning: {warning}", file=sys.stderr)
        log.warning("%s", warning)


def _configure_and_execute(session: SparkSession, conf: Mapping[str, str], path: Path,
                           file: str) -> tuple[int, str | None]:
    try:
        _warn(apply_settings(session, conf))
    except SparkConfError as error:
        text = f"{type(error).__name__}: {error}\n"
        sys.stderr.write(text)
        return 1, text
    return _execute(path, file)


def _execute(path: Path, file: str) -> tuple[int, str | None]:
    """Run the code of ``path`` as the file ``file`` (its name in tracebacks, __file__)."""
    namespace = {"__name__": "__main__", "__file__": file, "__builtins__": builtins,
                 "__package__": None, "__spec__": None, "__loader__": None,
                 "__cached__": None, "__doc__": None}
    folder = Path(file).parent
    try:
        code = compile(path.read_text(encoding="utf-8"), file, "exec")
        exec(code, namespace)
    except SystemExit as exc:
        status = exit_status(exc.code)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
        return status, (user_traceback(exc, folder) if status else None)
    except Exception as exc:
        text = user_traceback(exc, folder)
        sys.stderr.write(text)
        return 1, text
    return 0, None


def exit_status(code: object) -> int:
    """The status ``python script.py`` exits with after ``sys.exit(code)``: None is 0, a
    number is taken modulo 256 (as the operating system does), anything else is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


_script = threading.local()
_shim_lock = threading.Lock()
_shim_users = 0
_originals: dict[str, Any] = {}


def _script_session() -> SparkSession | None:
    return getattr(_script, "session", None)


def _set_script_session(session: SparkSession | None) -> None:
    _script.session = session


def _get_or_create(builder: Any) -> SparkSession:
    session = _script_session()
    if session is None:
        return _originals["getOrCreate"](builder)
    for key, value in getattr(builder, "_options", {}).items():
        try:  # one by one: a refused value does not keep the others from their session
            warnings = apply_settings(session, {key: str(value)}, "builder option")
        except SparkConfError as error:
            warnings = [str(error)]
        for warning in warnings:
            log.warning("%s", warning)  # not the script's stderr: appName() would warn each run
    return session


def _session_stop(self: SparkSession) -> None:
    if _script_session() is None:
        _originals["session_stop"](self)


def _context_stop(self: SparkContext) -> None:
    if _script_session() is None:
        _originals["context_stop"](self)


def _streaming_stop(self: Any, stopSparkContext: bool = True,
                    stopGraceFully: bool = False) -> None:
    """A script's ``ssc.stop(stopSparkContext=True)`` stops its streams only: through the
    JVM it would stop the TaskManager's SparkContext, which every later task needs."""
    if _script_session() is not None:
        stopSparkContext = False
    _originals["streaming_stop"](self, stopSparkContext, stopGraceFully)


def _foreach_rdd(self: Any, func: Callable[..., Any]) -> None:
    """A script's DStream output (``pprint``, ``foreachRDD``) runs on Py4J's callback
    thread: it prints into the script's output all the same."""
    if _script_session() is not None:
        per_batch = func if func.__code__.co_argcount != 1 else (  # pyspark's own test
            lambda _time, rdd, single=func: single(rdd))
        func = bound_to_this_thread(per_batch)  # takes *args: foreachRDD passes two
    _originals["foreach_rdd"](self, func)


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
    from pyspark.streaming import DStream, StreamingContext

    _originals.update(getOrCreate=SparkSession.Builder.getOrCreate,
                      session_stop=SparkSession.stop, context_stop=SparkContext.stop,
                      context_init=SparkContext.__init__,
                      context_new=SparkContext.__dict__.get("__new__"),
                      streaming_stop=StreamingContext.stop,
                      foreach_rdd=DStream.foreachRDD)
    SparkSession.Builder.getOrCreate = _get_or_create
    SparkSession.stop = _session_stop
    SparkContext.stop = _context_stop
    StreamingContext.stop = _streaming_stop
    DStream.foreachRDD = _foreach_rdd
    SparkContext.__init__ = _context_init
    SparkContext.__new__ = staticmethod(_context_new)
    sparkpaths.patch()
    scriptthreads.patch(_script_session, _set_script_session)
    scriptisolation.patch()  # after scriptthreads: both wrap Thread.start


def _unpatch() -> None:
    scriptisolation.unpatch()
    scriptthreads.unpatch()
    sparkpaths.unpatch()
    SparkSession.Builder.getOrCreate = _originals["getOrCreate"]
    SparkSession.stop = _originals["session_stop"]
    SparkContext.stop = _originals["context_stop"]
    SparkContext.__init__ = _originals["context_init"]
    from pyspark.streaming import DStream, StreamingContext

    StreamingContext.stop = _originals["streaming_stop"]
    DStream.foreachRDD = _originals["foreach_rdd"]
    if _originals["context_new"] is not None:
        SparkContext.__new__ = _originals["context_new"]
    # Else ours stays: outside a script it is object.__new__. Deleting an assigned
    # __new__ leaves CPython calling object.__new__ with the constructor's arguments,
    # which raises, so the next SparkContext (a TaskManager restarting Spark after its
    # JVM died) could not be made.
    _originals.clear()


@contextmanager
def _spark_shim(session: SparkSession, spark_base: str | None) -> Iterator[None]:
    """The patches of the module docstring and ``sparkpaths``: installed while any script
    runs, active only on the threads running one."""
    global _shim_users
    with _shim_lock:
        if _shim_users == 0:
            _patch()
        _shim_users += 1
    _script.session = session
    try:
        with sparkpaths.resolving_against(spark_base):
            yield
    finally:
        _script.session = None
        with _shim_lock:
            _shim_users -= 1
            if _shim_users == 0:
                _unpatch()
