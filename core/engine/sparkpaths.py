"""Relative paths a PySpark script hands to Spark, resolved against the submitter's folder.

Under ``spark-submit`` the driver's JVM starts in the submitter's working directory, so
``spark.read.text("data/x.txt")`` reads ``<that folder>/data/x.txt``. A TaskManager's JVM
is shared by every slot and resolves relative paths against its own directory (Java's
``user.dir``, Hadoop's LocalFileSystem working directory): both are per process, set
when the JVM starts, so they cannot be the script's.

So while a script runs, the PySpark methods that take a file path make a relative one
absolute against the submitter's folder before it reaches the JVM — on the script's
thread only (``resolving_against``): the readers and writers of DataFrames and streams
(also their ``path`` option), and SparkContext's and RDD's file methods. A path with a
scheme (``hdfs://``, ``file:``) or already absolute is left alone, as is every path when
the default filesystem is not the local one (relative paths then mean the user's
folder there, as with spark-submit). Paths inside SQL text (``parquet.`x```,
``LOCATION 'x'``) are not seen here and stay relative to the TaskManager's folder.

The folder is the one the script was submitted from, fixed for its whole run: a script
that calls ``os.chdir`` moves its Python side only, as under spark-submit, where the
JVM is another process.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark import RDD, SparkContext
from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

# The methods taking a path as an argument, and the name of that argument.
_PATH_ARGUMENTS = ("path", "paths", "name", "dirName")
_TAKE_PATHS: tuple[tuple[type, tuple[str, ...]], ...] = (
    (DataFrameReader, ("load", "json", "csv", "parquet", "orc", "text", "xml")),
    (DataFrameWriter, ("save", "json", "csv", "parquet", "orc", "text", "xml")),
    (DataStreamReader, ("load", "json", "csv", "parquet", "orc", "text", "xml")),
    (DataStreamWriter, ("start",)),
    (SparkContext, ("textFile", "wholeTextFiles", "binaryFiles", "binaryRecords",
                    "pickleFile", "sequenceFile", "hadoopFile", "newAPIHadoopFile",
                    "addFile", "addPyFile", "addArchive", "setCheckpointDir")),
    (RDD, ("saveAsTextFile", "saveAsPickleFile", "saveAsSequenceFile", "saveAsHadoopFile",
           "saveAsNewAPIHadoopFile")),
)
# The methods taking options, some of which may be paths.
_TAKE_OPTIONS: tuple[tuple[type, tuple[str, ...]], ...] = (
    (DataFrameReader, ("option", "options")),
    (DataFrameWriter, ("option", "options", "saveAsTable")),
    (DataStreamReader, ("option", "options")),
    (DataStreamWriter, ("option", "options")),
)
_PATH_OPTIONS = frozenset({"path", "checkpointlocation"})  # Spark's keys ignore case
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

_local = threading.local()
_originals: dict[tuple[type, str], Any] = {}


def absolute(path: str, base: str) -> str:
    """``path`` made absolute against ``base`` when it is a relative local path."""
    if not path or os.path.isabs(path) or _SCHEME.match(path):
        return path
    return os.path.join(base, path)


def resolves_locally(context: SparkContext) -> bool:
    """Whether a path without a scheme means a local file to this Spark (its default
    filesystem is ``file:``)."""
    default_fs = context._jsc.hadoopConfiguration().get("fs.defaultFS", "file:///")
    return str(default_fs).startswith("file:")


@contextmanager
def resolving_against(base: str | None) -> Iterator[None]:
    """While inside, relative paths this thread hands to Spark are made absolute against
    ``base`` (None: left alone). Needs ``patch()`` to be in effect."""
    _local.base = base
    try:
        yield
    finally:
        _local.base = None


def patch() -> None:
    """Wrap the methods of the module docstring; called once while any script runs."""
    for classes, wrap in ((_TAKE_PATHS, _path_taking), (_TAKE_OPTIONS, _option_taking)):
        for cls, names in classes:
            for name in names:
                method = cls.__dict__.get(name)
                if method is not None and (cls, name) not in _originals:
                    _originals[cls, name] = method
                    setattr(cls, name, wrap(method))


def unpatch() -> None:
    for (cls, name), method in _originals.items():
        setattr(cls, name, method)
    _originals.clear()


def _resolved(value: Any, base: str) -> Any:
    if isinstance(value, str):
        return absolute(value, base)
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return type(value)(absolute(item, base) for item in value)
    return value  # an RDD of JSON lines, a DataFrame, None: no path


def _with_resolved(method: Callable[..., Any],
                   resolve: Callable[[dict[str, Any], str], None]) -> Callable[..., Any]:
    signature = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        base = getattr(_local, "base", None)
        if base is None:
            return method(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return method(*args, **kwargs)  # PySpark's own error for a wrong call
        resolve(bound.arguments, base)
        return method(*bound.args, **bound.kwargs)

    return wrapper


def _path_taking(method: Callable[..., Any]) -> Callable[..., Any]:
    parameters = inspect.signature(method).parameters
    name = next(name for name in _PATH_ARGUMENTS if name in parameters)
    options = _var_keyword(parameters)

    def resolve(arguments: dict[str, Any], base: str) -> None:
        if name in arguments:
            arguments[name] = _resolved(arguments[name], base)
        if options in arguments:
            _resolve_options(arguments[options], base)

    return _with_resolved(method, resolve)


def _option_taking(method: Callable[..., Any]) -> Callable[..., Any]:
    options = _var_keyword(inspect.signature(method).parameters)

    def resolve(arguments: dict[str, Any], base: str) -> None:
        key = arguments.get("key")
        if isinstance(key, str) and key.lower() in _PATH_OPTIONS and "value" in arguments:
            arguments["value"] = _resolved(arguments["value"], base)
        if options in arguments:
            _resolve_options(arguments[options], base)

    return _with_resolved(method, resolve)


def _var_keyword(parameters: Any) -> str | None:
    return next((name for name, parameter in parameters.items()
                 if parameter.kind is inspect.Parameter.VAR_KEYWORD), None)


def _resolve_options(options: dict[str, Any], base: str) -> None:
    for key, value in options.items():
        if key.lower() in _PATH_OPTIONS:
            options[key] = _resolved(value, base)
