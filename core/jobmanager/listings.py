"""Listings that fit one message: the job list's pages and window, the cluster overview.

The job store and the TaskManager registry grow with the cluster's history, but every
message must stay under ``rpc.framesize`` (256 KiB: about 1,700 job summaries or 800
TaskManagers). So a listing is cut by the bytes its entries take as the codec writes them,
never by a count guessed once: a job name or a TaskManager id has no fixed length. Pure
functions; the Dispatcher and the ResourceManager call them on their main threads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.rpc import encoded_size

ENVELOPE_ALLOWANCE = 1024
"""Bytes kept for the envelope (sender, correlation id, fencing token, type) and the
listing's own scalar fields; they take about 300."""
NAME_KEPT = 200  # characters of a job's name a listing carries: one name cannot crowd out the rest


def budget(framesize: int) -> int:
    """Bytes a listing's entries may take in a message of at most ``framesize``."""
    return max(0, framesize - ENVELOPE_ALLOWANCE)


def listed(summary: p.JobSummary) -> p.JobSummary:
    """The summary as a listing carries it: its name cut to ``NAME_KEPT`` characters."""
    if len(summary.name) <= NAME_KEPT:
        return summary
    return replace(summary, name=summary.name[:NAME_KEPT - 1] + "\u2026")


def fitting(entries: Iterable[Any], space: int, limit: int) -> list[Any]:
    """The leading entries, at most ``limit``, that take at most ``space`` bytes together
    (a comma between two); stops at the first that would not fit, so a page never skips
    one. ``entries`` may be lazy: nothing past the page is built."""
    page: list[Any] = []
    used = 0
    for entry in entries:
        if len(page) >= limit:
            break
        used += encoded_size(entry) + (1 if page else 0)
        if used > space:
            break
        page.append(entry)
    return page


def fitted_overview(overview: p.ClusterOverview, framesize: int) -> p.ClusterOverview:
    """``overview`` as it fits one message: whole when it does; else its registered
    TaskManagers first and then the lost ones, as many as fit, with
    ``taskmanagers_left_out`` counting the rest. The ResourceManager bounds both counts
    (``resourcemanager.max-taskmanagers`` and ``max-lost-taskmanagers``), so this is the
    last line for ids or causes longer than anyone expected."""
    if encoded_size(overview) <= budget(framesize):
        return overview
    live = [t for t in overview.taskmanagers if t.state is p.TaskManagerState.REGISTERED]
    lost = [t for t in overview.taskmanagers if t.state is not p.TaskManagerState.REGISTERED]
    space = budget(framesize) - encoded_size(replace(overview, taskmanagers=()))
    kept = fitting([*live, *reversed(lost)], space, len(overview.taskmanagers))
    return replace(overview, taskmanagers=tuple(kept),
                   taskmanagers_left_out=len(overview.taskmanagers) - len(kept))
