"""User tracebacks as text: the frames of the user's code, without the machinery around it.

A failure record shows what broke in the user's code. Frames of the loader, of runpy-like
execution, of PySpark's worker and of this package are noise there, so they are cut:
leading frames up to the first frame in the user's folder, and, for errors raised in a
Spark Python worker, every frame inside PySpark or clusterdeck.
"""

from __future__ import annotations

import os
import re
import traceback
from pathlib import Path

_PACKAGE_DIR = str(Path(__file__).resolve().parent)
# The runtime's own code: the frames that call the user's functions when they run in the
# TaskManager's process (local execution), not the user's examples or tests beside it.
_CORE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
_IN_PROCESS_NOISE = (os.sep + "pyspark" + os.sep, os.sep + "py4j" + os.sep)
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line \d+')
_NOISE = (os.sep + "pyspark" + os.sep, "pyspark.zip", _PACKAGE_DIR)


def user_traceback(exc: BaseException, user_dir: str | os.PathLike[str]) -> str:
    """The traceback of ``exc`` from the first frame in ``user_dir`` on (all frames if none
    is there), without clusterdeck's frames at its end (an API call that refused its
    arguments shows as the user's line calling it). A SyntaxError shows its file, line
    and caret only."""
    if isinstance(exc, SyntaxError):
        return "".join(traceback.format_exception_only(exc))
    folder = os.path.realpath(user_dir) + os.sep
    summary = traceback.TracebackException.from_exception(exc)
    frames = list(summary.stack)
    users = [i for i, frame in enumerate(frames)
             if os.path.realpath(frame.filename).startswith(folder)
             and not frame.filename.startswith(_PACKAGE_DIR)]
    if users:
        end = len(frames)
        while end - 1 > users[0] and frames[end - 1].filename.startswith(_PACKAGE_DIR):
            end -= 1
        summary.stack = traceback.StackSummary.from_list(frames[users[0]:end])
    return "".join(summary.format())


def in_process_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` raised in this process, from the first frame that is not the
    runtime's or PySpark's on: a user's function run in place shows as its own frames, as
    it would from a Spark worker. Whole when every frame is the runtime's (its own fault)."""
    summary = traceback.TracebackException.from_exception(exc)
    frames = list(summary.stack)
    first = next((index for index, frame in enumerate(frames)
                  if not frame.filename.startswith(_CORE_DIR)
                  and not any(noise in frame.filename for noise in _IN_PROCESS_NOISE)), 0)
    summary.stack = traceback.StackSummary.from_list(frames[first:])
    return "".join(summary.format())


def worker_traceback(error_text: str) -> str:
    """The Python traceback inside a Spark error message (an exception raised in a Python
    worker), with PySpark's and clusterdeck's own frames left out; "" when there is none."""
    start = error_text.rfind("Traceback (most recent call last):")
    if start < 0:
        return ""
    lines = error_text[start:].splitlines()
    kept = [lines[0]]
    index = 1
    while index < len(lines):
        match = _FRAME.match(lines[index])
        if not match:
            break
        frame = [lines[index]]
        index += 1
        while index < len(lines) and lines[index].startswith("    "):
            frame.append(lines[index])
            index += 1
        if not any(noise in match.group("file") for noise in _NOISE):
            kept.extend(frame)
    for line in lines[index:]:
        if line.startswith(("\tat ", "\n")) or line.strip().startswith(("SQLSTATE", "JVM stack")):
            break
        kept.append(line.removesuffix(" SQLSTATE: 38000").rstrip())
    return "\n".join(line for line in kept if line.strip()) + "\n"


def last_line(traceback_text: str) -> str:
    """The exception line of a traceback (``ValueError: bad record``)."""
    lines = [line for line in traceback_text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
