"""Two flame graphs of one vertex side by side, from two runs (docs/comparing.md, "A
vertex's flame graphs"): which frames took a larger or smaller share of the samples.

A flame graph is saved as collapsed stacks (``root;...;leaf count``, what flamegraph.pl
and speedscope read), at most MAX_STACKS lines; a file read back is data like py-spy's
output: parsed and bounded (MAX_FILE bytes), never run. Frames are compared by function
and file, without the line: a line moves inside a function from one sample to the next
and from one version of a job file to the next. A frame's share is the part of the
samples whose stack holds it (counted once in a recursive stack), and its own share the
part that ended in it; the changes come biggest first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.core.profiling.pyspy import MAX_STACKS, FlameNode, ProfilingError, parse_collapsed

MAX_FILE = 64 * 1024 * 1024  # bytes of a saved flame graph read back
_LINE = re.compile(r"^(.*) \(([^()]*?):\d+\)$")


@dataclass(frozen=True)
class FrameChange:
    frame: str       # function (file)
    before: float    # share of the samples whose stack held it, 0 to 1
    after: float
    own_before: float  # share of the samples that ended in it
    own_after: float

    @property
    def change(self) -> float:
        return self.after - self.before


def collapsed_lines(root: FlameNode) -> list[str]:
    """Back to collapsed stacks: each path with the samples that ended there, at most
    MAX_STACKS, the ones with most samples first."""
    lines: list[tuple[int, str]] = []
    pending: list[tuple[FlameNode, str]] = [(child, child.name)
                                            for child in root.children.values()]
    while pending:
        node, path = pending.pop()
        own = node.samples - sum(child.samples for child in node.children.values())
        if own > 0:
            lines.append((own, path))
        pending.extend((child, f"{path};{child.name}") for child in node.children.values())
    lines.sort(key=lambda line: -line[0])
    return [f"{path} {own}\n" for own, path in lines[:MAX_STACKS]]


def save_flame_graph(root: FlameNode, path: Path) -> int:
    """Write ``root`` as collapsed stacks; returns the stacks written."""
    lines = collapsed_lines(root)
    path.write_text("".join(lines), encoding="utf-8")
    return len(lines)


def load_flame_graph(path: Path) -> FlameNode:
    """A flame graph saved by ``save_flame_graph`` (or any collapsed stacks)."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE + 1)
    except OSError as error:
        raise ProfilingError(f"{path} could not be read: {error.strerror or error}") from None
    if len(data) > MAX_FILE:
        raise ProfilingError(f"{path} is larger than {MAX_FILE // 2**20} MiB: not a flame "
                             "graph saved by clusterdeck")
    root, stacks, _cut = parse_collapsed(data.decode("utf-8", errors="replace"))
    if stacks == 0:
        raise ProfilingError(f"{path} holds no collapsed stacks (lines 'frame;frame count')")
    return root


def frame_name(frame: str) -> str:
    """A frame without its line: ``f (job.py:12)`` -> ``f (job.py)``."""
    match = _LINE.match(frame)
    return f"{match.group(1)} ({match.group(2)})" if match else frame


def frame_shares(root: FlameNode) -> tuple[dict[str, float], dict[str, float]]:
    """Each frame's share of ``root``'s samples on the stack, and ended in it."""
    total = root.samples
    held: dict[str, int] = {}
    own: dict[str, int] = {}
    on_path: dict[str, int] = {}  # the frames from the root to the node, with repeats
    pending: list[tuple[FlameNode, bool]] = [(child, False)
                                             for child in root.children.values()]
    while pending:
        node, leaving = pending.pop()
        name = frame_name(node.name)
        if leaving:
            on_path[name] -= 1
            if not on_path[name]:
                del on_path[name]
            continue
        on_path[name] = on_path.get(name, 0) + 1
        ended = node.samples - sum(child.samples for child in node.children.values())
        if ended > 0:
            for frame in on_path:
                held[frame] = held.get(frame, 0) + ended
            own[name] = own.get(name, 0) + ended
        pending.append((node, True))
        pending.extend((child, False) for child in node.children.values())
    if total <= 0:
        return {}, {}
    return ({name: count / total for name, count in held.items()},
            {name: count / total for name, count in own.items()})


def compare_flame_graphs(before: FlameNode, after: FlameNode,
                         limit: int = 50) -> list[FrameChange]:
    """The frames whose share changed most from ``before`` to ``after``, biggest first
    (by share on the stack, then by own share)."""
    held_before, own_before = frame_shares(before)
    held_after, own_after = frame_shares(after)
    changes = [FrameChange(name, held_before.get(name, 0.0), held_after.get(name, 0.0),
                           own_before.get(name, 0.0), own_after.get(name, 0.0))
               for name in held_before.keys() | held_after.keys()]
    changes.sort(key=lambda c: (-abs(c.change), -abs(c.own_after - c.own_before), c.frame))
    return changes[:limit]


def change_lines(changes: list[FrameChange]) -> list[str]:
    """A table of changes as text: share before, after, the change, own shares, frame."""
    lines = [f"{'before':>7} {'after':>7} {'change':>8}  {'own before':>10} {'own after':>9}"
             "  frame"]
    lines += [f"{c.before:7.1%} {c.after:7.1%} {c.change:+8.1%}  {c.own_before:10.1%} "
              f"{c.own_after:9.1%}  {c.frame}" for c in changes]
    return lines
