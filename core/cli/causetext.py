"""A job's chain of causes as text (``clusterdeck failures``): each root cause with what
it caused indented under it, as the window's Failures view draws the tree, and each
event's evidence: the message that carried it and the log lines of the processes
involved (``clusterdeck.core.protocol.causes``)."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from clusterdeck.core.protocol.causes import CauseChain, CauseEvent, CauseKind

__all__ = ["chain_json", "chain_lines"]


def chain_lines(chain: CauseChain) -> list[str]:
    """The tree, roots first in order; the chain's links were checked on receipt, so it
    is no deeper than ``DEPTH_KEPT``."""
    lines: list[str] = []
    for root in chain.roots():
        _walk(chain, root, 0, lines)
    if chain.dropped:
        lines.append(f"({chain.dropped} older event(s) not kept)")
    return lines


def chain_json(chain: CauseChain) -> dict[str, Any]:
    """The chain for ``--json``: its events oldest first, each naming its cause, every
    field as the protocol has it (``dataclasses.asdict``, as ``result --json`` does)."""
    return asdict(chain)


def _walk(chain: CauseChain, event: CauseEvent, depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    lines.append(f"{pad}- {_clock(event.at)} {event.summary}{_where(event)}")
    if event.more:
        lines.append(f"{pad}  and {event.more} more like it")
    if event.carried_by is not None:
        carried = event.carried_by
        lines.append(f"{pad}  carried by {carried.type} from {carried.sender}")
    lines.extend(f"{pad}  | {line.process}: {line.line}" for line in event.log_lines)
    for child in chain.children(event.id):
        _walk(chain, child, depth + 1, lines)


def _where(event: CauseEvent) -> str:
    if event.kind is CauseKind.ATTEMPT_FAILED:
        on = f" on {event.taskmanager_id}" if event.taskmanager_id else ""
        return f" ({event.vertex_id} subtask {event.subtask}{on})"
    return ""


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at)) if at > 0 else "--:--:--"
