"""One log across every process of a recording: filtered by process, level and text.

Log lines are stored as their processes wrote them; the level is read from the line
(the runtime's format puts it after the time, ``2026-11-25 20:57:22,222 INFO ...``, and
so does Spark's log4j, ``26/11/25 20:57:52 WARN ...``).
Lines without one (a traceback's, the supervisor's own) have no level: a level filter
leaves them out.
"""

from __future__ import annotations

import datetime
import re
import sqlite3
from collections.abc import Sequence

from clusterdeck.core.recorder.store import LogLine

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The runtime's lines, and Spark's (log4j: WARN, FATAL) read the same way.
_LEVEL = re.compile(r"^\S+ \S+ (DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL) ")
_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL"}
SCAN_LIMIT = 1_000_000  # rows looked at per search, so a huge recording answers in time


def level_of(line: str) -> str | None:
    found = _LEVEL.match(line)
    return _ALIASES.get(found.group(1), found.group(1)) if found else None


def search(connection: sqlite3.Connection, *, processes: Sequence[str] = (),
           text: str = "", level: str | None = None, limit: int = 1000) -> list[LogLine]:
    """The first ``limit`` lines (oldest first) of ``processes`` (all when empty) that
    contain ``text`` (case-insensitive) and are at ``level`` or above."""
    if level is not None and level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}")
    where, values = [], []
    if processes:
        where.append(f"process IN ({','.join('?' * len(processes))})")
        values += list(processes)
    if text:
        where.append("instr(lower(line), lower(?)) > 0")
        values.append(text)
    query = "SELECT at, process, line FROM logs"
    if where:
        query += " WHERE " + " AND ".join(where)
    lowest = LEVELS.index(level) if level else 0
    found: list[LogLine] = []
    for row in connection.execute(query + " ORDER BY id LIMIT ?", (*values, SCAN_LIMIT)):
        line = LogLine(*row)
        if level is not None:
            seen = level_of(line.line)
            if seen is None or LEVELS.index(seen) < lowest:
                continue
        found.append(line)
        if len(found) >= limit:
            break
    return found


def processes(connection: sqlite3.Connection) -> list[str]:
    return [row[0] for row in connection.execute(
        "SELECT DISTINCT process FROM logs ORDER BY process")]


def log_row(line: LogLine, width: int) -> str:
    """One line as the command line and the window show it: time, process, line."""
    at = datetime.datetime.fromtimestamp(line.at).strftime("%H:%M:%S")
    return f"{at} {line.process:<{width}} | {line.line}"
