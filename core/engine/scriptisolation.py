"""What one PySpark script leaves behind in a TaskManager, cleaned before the next one runs.

A TaskManager keeps one SparkContext and runs every script in its process, on a slot
thread, each with a session of its own (``newSession()``): temporary views, SQL
settings, the current database and registered functions are per session already. What
sessions and threads share is cleaned when the script ends — succeeded, failed or
cancelled — from what this module saw the script do on its thread while it ran:

* global temporary views it created with ``createGlobalTempView`` /
  ``createOrReplaceGlobalTempView`` are dropped; so is any view new in the global
  temporary database when no other script ran meanwhile (one made with SQL text);
* data it cached: DataFrames and RDDs it ``cache()``d or ``persist()``ed, tables it
  ``cacheTable()``d and its session's temporary views that are cached (SQL ``CACHE
  TABLE``) are uncached;
* broadcast variables it made with ``SparkContext.broadcast`` are destroyed;
* environment variables it set or removed through ``os.environ`` get their old values;
* modules imported from the script's folder leave ``sys.modules`` (``importable_from``);
* threads it started and left running are named in a warning; they are not stopped,
  as Python cannot stop a thread.

Only the script's own thread is watched: threads it starts are not, and a cache, view
or variable made there is cleaned only by the rules that do not need to know who made
it. The wrappers are installed with the script shim (``patch``/``unpatch``, under its
lock) and record only on a thread that runs a script (``isolated``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import RDD, SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.catalog import Catalog
from pyspark.sql.classic.dataframe import DataFrame

from clusterdeck.core.jobapi.loader import forget_modules_from

log = logging.getLogger(__name__)


@dataclass
class _Trail:
    """What one script did on its thread that outlives its session."""

    global_views: set[str] = field(default_factory=set)
    cached: list[Any] = field(default_factory=list)        # DataFrames and RDDs
    cached_tables: list[tuple[Catalog, str]] = field(default_factory=list)
    broadcasts: list[Any] = field(default_factory=list)
    environment: dict[str, str | None] = field(default_factory=dict)  # the values before
    threads: list[threading.Thread] = field(default_factory=list)
    alone: bool = True   # no other script ran at any time while this one did


_local = threading.local()
_running_lock = threading.Lock()
_running: list[_Trail] = []
_originals: dict[str, Any] = {}


def _trail() -> _Trail | None:
    return getattr(_local, "trail", None)


@contextmanager
def isolated(session: SparkSession, warn: Callable[[str], None]) -> Iterator[None]:
    """Watch the script run on this thread inside; afterwards clean what it left behind
    (module docstring) and ``warn`` of the threads it left running. Enter and leave on
    the script's thread, with the wrappers installed (``patch``)."""
    trail = _Trail()
    with _running_lock:
        for other in _running:
            other.alone = False
        trail.alone = not _running
        _running.append(trail)
    global_db = _global_temp_database(session)
    views_before = _global_views(session, global_db)
    _local.trail = trail
    try:
        yield
    finally:
        _local.trail = None
        with _running_lock:
            _running.remove(trail)
        _clean(session, trail, global_db, views_before, warn)


def _clean(session: SparkSession, trail: _Trail, global_db: str,
           views_before: set[str] | None, warn: Callable[[str], None]) -> None:
    _restore_environment(trail.environment)
    views = set(trail.global_views)
    if trail.alone and views_before is not None:
        views |= (_global_views(session, global_db) or set()) - views_before
    for data in trail.cached:
        _attempt("unpersist", data.unpersist)
    for catalog, name in trail.cached_tables:
        _attempt(f"uncache table {name}", _uncache_table, catalog, name)
    for name in [*_local_views(session), *(f"{global_db}.{view}" for view in views)]:
        _attempt(f"uncache view {name}", _uncache_table, session.catalog, name)
    for view in views:
        _attempt(f"drop global temporary view {view}", session.catalog.dropGlobalTempView,
                 view)
    for broadcast in trail.broadcasts:
        _attempt("destroy a broadcast variable", broadcast.destroy)
    left = [thread.name for thread in trail.threads if thread.is_alive()]
    if left:
        warn(f"the script left {len(left)} thread(s) running in the TaskManager: "
             f"{', '.join(left)}; they are not stopped and may disturb the jobs after it")


def _attempt(what: str, step: Callable[..., Any], *args: Any) -> None:
    """One cleaning step; its failure (a JVM gone, a view dropped meanwhile) is logged and
    keeps neither the others nor the script's result from going on."""
    try:
        step(*args)
    except Exception as error:   # the attempt's log says what was left
        log.warning("could not %s after the script: %s", what, error)


def _global_temp_database(session: SparkSession) -> str:
    try:
        return session.conf.get("spark.sql.globalTempDatabase", "global_temp") or "global_temp"
    except Exception:   # Spark's default name
        return "global_temp"


def _global_views(session: SparkSession, database: str) -> set[str] | None:
    """The views in the global temporary database (None: Spark could not list them)."""
    try:
        return {table.name for table in session.catalog.listTables(database)
                if table.isTemporary and table.database == database}
    except Exception as error:   # then only the recorded ones are dropped
        log.warning("could not list the global temporary views: %s", error)
        return None


def _local_views(session: SparkSession) -> list[str]:
    """The session's own temporary views (SQL ``CACHE TABLE`` may have cached them)."""
    try:
        return [table.name for table in session.catalog.listTables()
                if table.isTemporary and table.database is None]
    except Exception as error:   # the recorded caches are still uncached
        log.warning("could not list the script's temporary views: %s", error)
        return []


def _uncache_table(catalog: Catalog, name: str) -> None:
    if catalog.tableExists(name) and catalog.isCached(name):
        catalog.uncacheTable(name)


def _restore_environment(before: dict[str, str | None]) -> None:
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


class _WatchedEnviron(os._Environ):  # type: ignore[name-defined,misc]
    """``os.environ``'s class while scripts run: a change made on a script's thread
    remembers the value it replaced."""

    def __setitem__(self, key: str, value: str) -> None:
        _remember_variable(self, key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        _remember_variable(self, key)
        super().__delitem__(key)


def _remember_variable(environ: Any, key: str) -> None:
    trail = _trail()
    if trail is not None and key not in trail.environment:
        trail.environment[key] = environ.get(key)


def _recording(name: str, record: Callable[[_Trail, Any, tuple, Any], None]) -> Callable:
    original = _originals[name]

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        trail = _trail()
        if trail is not None:
            record(trail, self, args, result)
        return result

    wrapper.__name__ = getattr(original, "__name__", "wrapper")
    wrapper.__doc__ = original.__doc__
    return wrapper


_WATCHED: tuple[tuple[type, str, Callable[[_Trail, Any, tuple, Any], None]], ...] = (
    (DataFrame, "cache", lambda t, df, a, r: t.cached.append(df)),
    (DataFrame, "persist", lambda t, df, a, r: t.cached.append(df)),
    (RDD, "cache", lambda t, rdd, a, r: t.cached.append(rdd)),
    (RDD, "persist", lambda t, rdd, a, r: t.cached.append(rdd)),
    (Catalog, "cacheTable", lambda t, catalog, a, r: t.cached_tables.append((catalog, a[0]))),
    (DataFrame, "createGlobalTempView", lambda t, df, a, r: t.global_views.add(a[0])),
    (DataFrame, "createOrReplaceGlobalTempView",
     lambda t, df, a, r: t.global_views.add(a[0])),
    (SparkContext, "broadcast", lambda t, sc, a, r: t.broadcasts.append(r)),
    (threading.Thread, "start", lambda t, thread, a, r: t.threads.append(thread)),
)


def patch() -> None:
    """Install the wrappers; called by the script shim when its first script starts."""
    for owner, name, record in _WATCHED:
        key = f"{owner.__qualname__}.{name}"
        _originals[key] = owner.__dict__[name]
        setattr(owner, name, _recording(key, record))
    if type(os.environ) is os._Environ:  # type: ignore[attr-defined]
        os.environ.__class__ = _WatchedEnviron


def unpatch() -> None:
    """Remove them; called by the script shim when its last script has ended."""
    if type(os.environ) is _WatchedEnviron:
        os.environ.__class__ = os._Environ  # type: ignore[attr-defined]
    for owner, name, _record in _WATCHED:
        setattr(owner, name, _originals.pop(f"{owner.__qualname__}.{name}"))


@contextmanager
def importable_from(folder: Path) -> Iterator[None]:
    """The script's folder first on sys.path, as ``python script.py`` has it; the modules
    it imported from there leave ``sys.modules`` afterwards, so the next script imports
    its own copy afresh."""
    before = set(sys.modules)
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        if str(folder) in sys.path:
            sys.path.remove(str(folder))
        forget_modules_from(folder, before)
