"""A failure record as a reader wants it: HTML with the user's frames marked.

A traceback mixes the user's frames with the frames of the library code they called
(PySpark, the standard library). The user's are marked (bold, red) so the eye goes to the
line that broke: a frame is the user's when its file is the job file or in its folder,
which on a TaskManager is the job's unpacked artifact (``.../jobs/<job-id>/...``) and on
this machine the folder the job was submitted from. Pure code (no Qt).
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Mapping
from pathlib import Path

from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.ids import subtask_id
from clusterdeck.core.protocol.sparkwork import SparkWork
from clusterdeck.gui.models.formatting import clock_millis

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
USER_COLOUR = "#b03a36"
DASH = "\u2013"


def is_user_file(filename: str, job_id: str = "", job_file: Path | None = None) -> bool:
    """Is ``filename`` (from a traceback) the user's code?"""
    if job_id and f"{os.sep}jobs{os.sep}{job_id}{os.sep}" in filename:
        return True
    if job_file is not None:
        folder = str(Path(job_file).resolve().parent) + os.sep
        if filename.startswith(folder) or filename == str(job_file):
            return "site-packages" not in filename[len(folder):]
    return False


def user_frames(traceback_text: str, job_id: str = "",
                job_file: Path | None = None) -> list[int]:
    """Line numbers (0-based) of the traceback's user frames and their source lines."""
    lines = traceback_text.splitlines()
    marked: list[int] = []
    for index, line in enumerate(lines):
        match = _FRAME.match(line)
        if match and is_user_file(match.group("file"), job_id, job_file):
            marked.append(index)
            following = index + 1
            while following < len(lines) and lines[following].startswith("    ") \
                    and not _FRAME.match(lines[following]):
                marked.append(following)
                following += 1
    return marked


def traceback_html(traceback_text: str, job_id: str = "",
                   job_file: Path | None = None) -> str:
    """``<pre>`` of the traceback, the user's frames bold and red, the last line (the
    exception) bold."""
    lines = traceback_text.rstrip().splitlines()
    marked = set(user_frames(traceback_text, job_id, job_file))
    out = []
    for index, line in enumerate(lines):
        text = html.escape(line)
        if index in marked:
            text = f'<b style="color:{USER_COLOUR}">{text}</b>'
        elif index == len(lines) - 1:
            text = f"<b>{text}</b>"
        out.append(text)
    return "<pre>" + "\n".join(out) + "</pre>"


def attempt_number(failure: FailureRecord) -> str:
    """The attempt's number; ``?`` for the root cause of a job that never started (it
    has no attempt)."""
    return str(failure.attempt) if failure.attempt >= 0 else "?"


def failure_html(failure: FailureRecord, *, root_cause: bool = False, job_id: str = "",
                 job_file: Path | None = None,
                 vertex_names: Mapping[str, str] | None = None,
                 spark: SparkWork | None = None) -> str:
    """The whole record: exception and message, where and when, traceback, log excerpt;
    for a PySpark script, the Spark tasks of its attempt that failed (``spark``), with
    Spark's error, in which a Python task's traceback marks the user's frames too."""
    title = html.escape(f"{failure.exception_type}: {failure.message}")
    start, end = failure.start_time, failure.end_time
    ran = f" ({end - start:.1f} s)" if start and end else ""
    slot = failure.slot_index
    splits = ", ".join(map(str, failure.input_splits)) or DASH
    vertex_id = failure.vertex_id
    rows = [("Subtask", f"{(vertex_names or {}).get(vertex_id, vertex_id)} "
                        f"({subtask_id(vertex_id, failure.subtask)})"),
            ("Attempt", f"{attempt_number(failure)} ({failure.attempt_id})"),
            ("TaskManager", f"{failure.taskmanager_id or DASH}"
                            + (f", slot {slot}" if slot is not None else "")),
            ("Input splits", splits),
            ("Started", clock_millis(start)), ("Failed", clock_millis(end) + ran)]
    parts = [f'<h3 style="color:{USER_COLOUR}">'
             + ("Root cause \u2014 " if root_cause else "") + f"{title}</h3>",
             "<table cellspacing=0 cellpadding=2>"
             + "".join(f"<tr><td><b>{html.escape(k)}</b>&nbsp;&nbsp;</td>"
                       f"<td>{html.escape(v)}</td></tr>" for k, v in rows) + "</table>"]
    if failure.traceback:
        parts += ["<h4>Traceback <span style='font-weight:normal; color:#5b6470'>"
                  f"(<b style='color:{USER_COLOUR}'>your code</b> marked)</span></h4>",
                  traceback_html(failure.traceback, job_id, job_file)]
    if spark is not None and spark.failed_tasks:
        parts += ["<h4>Spark tasks that failed (the last first)</h4>"]
        stages = {(stage.stage_id, stage.attempt): stage for stage in spark.stages}
        for task in reversed(spark.failed_tasks):
            stage = stages.get((task.stage_id, task.stage_attempt))
            parts += [f"<p style='color:{USER_COLOUR}'>" + html.escape(
                f"Stage {task.stage_id}.{task.stage_attempt}"
                + (f" ({stage.name})" if stage else "")
                + f", task {task.index}.{task.attempt} (TID {task.task_id}) on executor "
                f"{task.executor}: {task.summary}") + "</p>"]
            if task.error:
                parts += [traceback_html(task.error, job_id, job_file)]
    if failure.log_excerpt:
        parts += ["<h4>Log excerpt</h4>",
                  "<pre>" + html.escape("\n".join(failure.log_excerpt)) + "</pre>"]
    return "\n".join(parts)
