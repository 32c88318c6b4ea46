"""Per-thread stdout, stderr and ``sys.argv`` for a PySpark script on a slot thread.

A TaskManager runs several tasks at once, one per slot thread, in one process, while
``sys.stdout``, ``sys.stderr`` and ``sys.argv`` are process-wide. While any script runs,
they are replaced by routers that send each thread to its own buffers and arguments; a
thread that is not running a script (the endpoint's main thread, other tasks, logging)
sees the original objects. The routers are installed by the first script to start and
removed when the last one ends (unless someone else replaced them meanwhile).

Output written to the file descriptors directly (the JVM's log4j, C extensions) and
output of threads the script starts itself is not captured, except for functions bound
with ``bound_to_this_thread`` (a DStream's ``foreachRDD``, which ``pprint`` uses, runs on
Py4J's callback thread).
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from clusterdeck.core.engine.liveoutput import LiveOutput

_local = threading.local()
_lock = threading.Lock()
_users = 0
_originals: tuple[Any, Any, Any] | None = None
_routers: tuple[Any, Any, Any] | None = None


class _StreamRouter:
    """Stands in for sys.stdout / sys.stderr: writes go to the thread's buffer, if any."""

    def __init__(self, name: str, fallback: Any) -> None:
        self._name = name
        self._fallback = fallback

    def _target(self) -> Any:
        return getattr(_local, self._name, None) or self._fallback

    def write(self, text: str) -> int:
        return self._target().write(text)

    def writelines(self, lines: Sequence[str]) -> None:
        self._target().writelines(lines)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


class _ArgvRouter(list):
    """Stands in for sys.argv: reads and changes go to the thread's arguments, if any."""

    def __init__(self, fallback: list[str]) -> None:
        super().__init__()
        self._fallback = fallback

    def _current(self) -> list[str]:
        argv = getattr(_local, "argv", None)
        return self._fallback if argv is None else argv

    def __iadd__(self, other: Any) -> _ArgvRouter:
        self._current().extend(other)
        return self


def _delegate(name: str) -> Callable[..., Any]:
    def method(self: _ArgvRouter, *args: Any) -> Any:
        return getattr(self._current(), name)(*args)

    method.__name__ = name
    return method


for _name in ("__getitem__", "__setitem__", "__delitem__", "__len__", "__iter__",
              "__contains__", "__repr__", "__str__", "__eq__", "__ne__", "__add__",
              "__reversed__", "index", "count", "append", "extend", "insert", "pop", "remove",
              "copy", "clear", "reverse", "sort"):
    setattr(_ArgvRouter, _name, _delegate(_name))


def _install() -> None:
    global _users, _originals, _routers
    with _lock:
        if _users == 0:
            _originals = (sys.stdout, sys.stderr, sys.argv)
            _routers = (_StreamRouter("stdout", sys.stdout), _StreamRouter("stderr", sys.stderr),
                        _ArgvRouter(sys.argv))
            sys.stdout, sys.stderr, sys.argv = _routers
        _users += 1


def _uninstall() -> None:
    global _users, _originals, _routers
    with _lock:
        _users -= 1
        if _users == 0 and _originals is not None and _routers is not None:
            current = (sys.stdout, sys.stderr, sys.argv)
            for index, name in enumerate(("stdout", "stderr", "argv")):
                if current[index] is _routers[index]:
                    setattr(sys, name, _originals[index])
            _originals = _routers = None


class _Teed(io.StringIO):
    """A thread's buffer that also hands each write to the live feed."""

    def __init__(self, stream: str, live: LiveOutput) -> None:
        super().__init__()
        self._stream = stream
        self._live = live

    def write(self, text: str) -> int:
        written = super().write(text)
        self._live.write(self._stream, text)
        return written


@contextmanager
def thread_io(argv: Sequence[str], live: LiveOutput | None = None
              ) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """While inside, this thread's stdout and stderr go to the yielded buffers (and to
    ``live`` as they are written, when given) and its ``sys.argv`` is ``argv``. Enter and
    leave on the same thread."""
    out, err = ((_Teed("stdout", live), _Teed("stderr", live)) if live is not None
                else (io.StringIO(), io.StringIO()))
    _install()
    _local.stdout, _local.stderr, _local.argv = out, err, list(argv)
    try:
        yield out, err
    finally:
        _local.stdout = _local.stderr = _local.argv = None
        _uninstall()


def bound_to_this_thread(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func``, printing into this thread's buffers (if it has any) on whatever thread
    later calls it: for callbacks of the script that another thread runs."""
    out, err = getattr(_local, "stdout", None), getattr(_local, "stderr", None)
    if out is None:
        return func

    def bound(*args: Any, **kwargs: Any) -> Any:
        previous = getattr(_local, "stdout", None), getattr(_local, "stderr", None)
        _local.stdout, _local.stderr = out, err
        try:
            return func(*args, **kwargs)
        finally:
            _local.stdout, _local.stderr = previous
    return bound
