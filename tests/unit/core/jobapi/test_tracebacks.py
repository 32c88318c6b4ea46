"""A failure raised in the TaskManager's own process (a user's function run in place by
local execution) reads as the user's frames, as one from a Spark worker does."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterdeck.core.engine.runtime import failure_of
from clusterdeck.core.jobapi import tracebacks
from clusterdeck.core.jobapi.tracebacks import in_process_traceback

RUNTIME_FILE = Path(tracebacks.__file__).resolve().parents[1] / "engine" / "runtime.py"


def users_function(tmp_path: Path) -> Callable[[int], Any]:
    (tmp_path / "users_job.py").write_text(
        "def check(record):\n    raise ValueError(f'record {record} is bad')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module("users_job").check
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("users_job", None)


# What local execution does, in a file that is the runtime's own: calls the user's function
# and catches what it raises, so the traceback starts in the runtime's frames.
RUNTIME_CODE = """
def run(function, record):
    try:
        function(record)
    except Exception as error:
        return error

def broken(record):
    return run(lambda r: r.missing, record)
"""


def runtime() -> dict[str, Any]:
    scope: dict[str, Any] = {}
    exec(compile(RUNTIME_CODE, str(RUNTIME_FILE), "exec"), scope)
    return scope


def test_a_users_function_run_in_place_shows_from_its_own_frame(tmp_path: Path) -> None:
    error = runtime()["run"](users_function(tmp_path), 777)
    text = in_process_traceback(error)
    assert 'users_job.py", line 2, in check' in text
    assert "runtime.py" not in text
    assert text.rstrip().endswith("ValueError: record 777 is bad")
    failure = failure_of(error, "vertex-1", 3, "a0")
    assert failure.traceback_text == text
    assert str(failure).startswith("ValueError: record 777 is bad")


def test_a_fault_of_the_runtime_itself_keeps_every_frame() -> None:
    error = runtime()["broken"](1)
    text = in_process_traceback(error)
    assert "runtime.py" in text and "AttributeError" in text
