"""The checks of the job API's arguments: operator keywords, paths, seconds, schemas, keys.

An operator call with a wrong argument fails at once, naming the operator and, for a
misspelt keyword, the keyword it probably meant; the loader reports it at submit time
with the user's line. Paths are made absolute against the submitter's folder; nothing
here touches the filesystem. Called on whichever thread loads the job.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from clusterdeck.core.jobapi.plan import KeySpec
from clusterdeck.core.protocol.jobgraph import is_url

F = TypeVar("F", bound=Callable[..., Any])
PathLike = str | os.PathLike[str]

AGGREGATE_FUNCTIONS = frozenset({"sum", "count", "min", "max", "avg", "mean", "first", "last",
                                 "collect_list", "collect_set", "count_distinct"})
JOIN_TYPES = {"inner": "inner", "left": "left", "left_outer": "left", "right": "right",
              "right_outer": "right", "full": "full", "outer": "full", "full_outer": "full",
              "semi": "left_semi", "left_semi": "left_semi", "anti": "left_anti",
              "left_anti": "left_anti"}
SQL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_WINDOWS_PER_RECORD = 1000  # size / slide of a sliding window: each is state per record


def checked_operator(op_name: str) -> Callable[[F], F]:
    """Check an operator call's arguments before it runs, so a misspelt keyword gives
    ``map() got an unknown argument 'paralelism' (did you mean 'parallelism'?)``."""

    def decorate(method: F) -> F:
        signature = inspect.signature(method)
        accepted = [p for p in signature.parameters if p != "self"]

        @functools.wraps(method)
        def checked(*args: Any, **kwargs: Any) -> Any:
            unknown = [key for key in kwargs if key not in accepted]
            if unknown:
                close = difflib.get_close_matches(unknown[0], accepted, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise TypeError(f"{op_name}() got an unknown argument {unknown[0]!r}{hint}; "
                                f"it takes: {', '.join(accepted)}")
            try:
                signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{op_name}(): {exc}") from None
            return method(*args, **kwargs)

        return checked  # type: ignore[return-value]

    return decorate


def input_paths(op_name: str, path: PathLike | Sequence[PathLike]) -> list[str]:
    items = [path] if isinstance(path, str | os.PathLike) else list(path)
    if not items or not all(isinstance(item, str | os.PathLike) for item in items):
        raise TypeError(f"{op_name}(): a path is a file, a folder or a glob, or a list of them; "
                        f"got {path!r}")
    return [absolute_path(os.fspath(item)) for item in items]


def sink_path(op_name: str, path: PathLike) -> str:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"{op_name}(): the output is one folder path, got {path!r}")
    path = os.fspath(path)
    if path.startswith("file://"):  # a shared mount: published with local renames
        return os.path.abspath(path.removeprefix("file://"))
    if is_url(path):
        raise ValueError(f"{op_name}(): file sinks publish into a folder of the machine "
                         f"that runs them; {path!r} is not one (write to a shared mount, "
                         f"file:///..., or from a PySpark script)")
    return absolute_path(path)


def watched_folder(path: PathLike) -> str:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"folder_source(): the folder is one path, got {path!r}")
    path = os.fspath(path)
    if path.startswith("file://"):  # a shared mount every TaskManager lists
        return os.path.abspath(path.removeprefix("file://"))
    if is_url(path):
        raise ValueError(f"folder_source(): watches a folder of the machines that run it; "
                         f"{path!r} is not one (a shared mount is file:///...)")
    return absolute_path(path)


def is_seconds(value: Any) -> bool:
    """A finite number of seconds (bools are not)."""
    return not isinstance(value, bool) and isinstance(value, int | float) \
        and value == value and value not in (float("inf"), float("-inf"))


def absolute_path(path: str) -> str:
    """A local path made absolute against the submitter's folder; a URL as it is."""
    return path if is_url(path) else os.path.abspath(os.path.expanduser(path))


def schema_text(op_name: str, schema: Any) -> str | None:
    """A schema as text: a DDL string (``"word STRING, n BIGINT"``) or a StructType's JSON."""
    if schema is None or isinstance(schema, str):
        return schema
    if hasattr(schema, "json"):
        return schema.json()
    raise TypeError(f"{op_name}(): schema is a DDL string or a StructType, got {schema!r}")


def user_function(op_name: str, fn: Any) -> Callable[..., Any]:
    if not callable(fn):
        raise TypeError(f"{op_name}(): expected a function, got {fn!r}")
    return fn


def key_fields(op_name: str, key: Any) -> list[str | int]:
    spec, fn = KeySpec.of(key)
    if fn is not None:
        raise TypeError(f"{op_name}(): keys here are field names or positions, not functions")
    return list(spec.fields)


def checked_parallelism(op_name: str, parallelism: Any) -> int:
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise ValueError(f"{op_name}(): parallelism must be a whole number >= 1, "
                         f"got {parallelism!r}")
    return parallelism
