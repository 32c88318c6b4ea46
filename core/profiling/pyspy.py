"""A look inside a running clusterdeck process with py-spy: a thread dump and a sampled
flame graph (docs/profiling.md).

py-spy reads the process's memory from outside (ptrace), so the process runs on
undisturbed and needs no agent; it sees only processes of this machine, and only where
the kernel lets it (root, or ``kernel.yama.ptrace_scope`` 0 for a process that is not a
child of the caller). Every failure is a ProfilingError saying why: py-spy missing, the
process gone, permission refused, a timeout. What py-spy prints is data: parsed, bounded
(MAX_STACKS distinct stacks, MAX_DEPTH frames each), never run.

For a TaskManager, ``subprocesses`` takes in Spark's Python workers too (the user's
functions run there); the Spark JVM is Java and invisible to py-spy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_STACKS = 20_000    # distinct stacks read from one recording
MAX_DEPTH = 200        # frames kept of one stack, from its root
MAX_SECONDS = 60.0
DUMP_TIMEOUT = 20.0


class ProfilingError(Exception):
    """Why a process could not be looked into."""


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    line: int

    @property
    def label(self) -> str:
        return f"{self.function} ({os.path.basename(self.file)}:{self.line})"


@dataclass(frozen=True)
class ThreadStack:
    """One thread at the moment of the dump: innermost frame first."""

    thread_id: int
    name: str
    active: bool
    frames: tuple[Frame, ...]
    pid: int = 0


@dataclass
class FlameNode:
    """One frame in the flame graph: ``samples`` in which it was on the stack."""

    name: str
    samples: int = 0
    children: dict[str, FlameNode] = field(default_factory=dict)

    def add(self, stack: list[str], count: int) -> None:
        self.samples += count
        node = self
        for name in stack[:MAX_DEPTH]:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = FlameNode(name)
            child.samples += count
            node = child

    def hottest(self, limit: int = 10) -> list[tuple[str, int]]:
        """The frames with most samples of their own (on top of the stack)."""
        own: dict[str, int] = {}
        stack = [self]
        while stack:
            node = stack.pop()
            below = sum(child.samples for child in node.children.values())
            if node is not self and node.samples > below:
                own[node.name] = own.get(node.name, 0) + node.samples - below
            stack.extend(node.children.values())
        return sorted(own.items(), key=lambda item: -item[1])[:limit]


@dataclass(frozen=True)
class FlameGraph:
    pid: int
    seconds: float
    rate: int
    root: FlameNode
    stacks: int  # distinct stacks read
    cut: bool    # more stacks than MAX_STACKS: the rest are not in it


def with_workers(name: str, role: str = "") -> bool:
    """Whether a look at this process takes in its Python children: a TaskManager's user
    code runs in Spark's Python workers."""
    return role == "taskmanager" or name.startswith("taskmanager")


def hottest_lines(root: FlameNode, limit: int) -> list[str]:
    """The frames most samples ended in, one line each: share, samples, frame."""
    total = max(1, root.samples)
    return [f"{count / total:7.1%} {count:8,}  {name}" for name, count in root.hottest(limit)]


def thread_lines(thread: ThreadStack) -> list[str]:
    """A thread's header line, then its frames, innermost first."""
    state = "active" if thread.active else "idle"
    where = f"pid {thread.pid}, " if thread.pid else ""
    return [f"Thread {thread.name or thread.thread_id} ({where}{state})",
            *(f"    {frame.label}" for frame in thread.frames)]


def pyspy_binary() -> str:
    """py-spy next to this interpreter (a virtualenv's bin) or on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.is_file() else shutil.which("py-spy")
    if not found:
        raise ProfilingError("py-spy is not installed (pip install py-spy)")
    return found


def thread_dump(pid: int, subprocesses: bool = False) -> list[ThreadStack]:
    """Every Python thread of ``pid`` now (and of its Python children)."""
    command = [pyspy_binary(), "dump", "--json", "--pid", str(pid)]
    if subprocesses:
        command.append("--subprocesses")
    output = run_pyspy(command, pid, DUMP_TIMEOUT)
    return parse_dump(output, pid)


def flame_graph(pid: int, seconds: float = 5.0, rate: int = 100, idle: bool = False,
                subprocesses: bool = False) -> FlameGraph:
    """Sample ``pid``'s stacks ``rate`` times a second for ``seconds``."""
    seconds = max(0.5, min(MAX_SECONDS, seconds))
    with tempfile.TemporaryDirectory(prefix="clusterdeck-profile-") as folder:
        out = Path(folder) / "stacks.txt"
        command = [pyspy_binary(), "record", "--pid", str(pid), "--format", "raw",
                   "--duration", str(max(1, round(seconds))), "--rate", str(rate),
                   "--output", str(out), "--nonblocking"]
        if idle:
            command.append("--idle")
        if subprocesses:
            command.append("--subprocesses")
        run_pyspy(command, pid, seconds + DUMP_TIMEOUT)
        text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
    root, stacks, cut = parse_collapsed(text)
    return FlameGraph(pid, seconds, rate, root, stacks, cut)


def parse_collapsed(text: str) -> tuple[FlameNode, int, bool]:
    """py-spy's raw format (Brendan Gregg's collapsed stacks): ``root;...;leaf count``."""
    root = FlameNode("all")
    stacks = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        if stacks == MAX_STACKS:
            return root, stacks, True
        root.add([_process_frame(frame) for frame in stack.split(";")], int(count))
        stacks += 1
    return root, stacks, False


_PROCESS_FRAME = re.compile(r'^process (\d+):"(.*)"$')


def _process_frame(frame: str) -> str:
    """``--subprocesses`` roots each stack at ``process <pid>:"<command line>"``: named
    by its program instead (the module it runs), not by paths and arguments."""
    match = _PROCESS_FRAME.match(frame)
    if match is None:
        return frame
    words = match.group(2).split()
    program = os.path.basename(words[0]) if words else "?"
    if "-m" in words[:-1]:
        program = " ".join(words[words.index("-m") + 1:words.index("-m") + 3])
    return f"process {match.group(1)} ({program})"


def parse_dump(output: str, pid: int = 0) -> list[ThreadStack]:
    """``py-spy dump --json``: a list of traces (one per thread) or of processes."""
    try:
        data = json.loads(output)
    except ValueError as error:
        raise ProfilingError(f"py-spy's dump could not be read: {error}") from None
    traces: list[tuple[int, Any]] = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and "traces" in item:  # --subprocesses
            traces += [(int(item.get("pid", 0)), t) for t in item["traces"]]
        else:
            traces.append((pid, item))
    return [_thread(owner, trace) for owner, trace in traces if isinstance(trace, dict)]


def _thread(pid: int, trace: dict[str, Any]) -> ThreadStack:
    frames = tuple(Frame(str(f.get("name", "?")), str(f.get("filename", "?")),
                         int(f.get("line", 0) or 0))
                   for f in trace.get("frames", [])[:MAX_DEPTH] if isinstance(f, dict))
    return ThreadStack(int(trace.get("thread_id", 0) or 0),
                       str(trace.get("thread_name") or ""),
                       bool(trace.get("active", False)), frames, pid)


def run_pyspy(command: list[str], pid: int, timeout: float) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        raise ProfilingError(f"py-spy did not finish within {timeout:g} s") from None
    except OSError as error:
        raise ProfilingError(f"py-spy could not run: {error}") from None
    if done.returncode != 0:
        raise ProfilingError(_why(done.stderr or done.stdout, pid))
    return done.stdout


def _why(message: str, pid: int) -> str:
    """py-spy's own sentence (its "Error:" line, not its backtrace), and what it means."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    text = next((line.removeprefix("Error:").strip() for line in lines
                 if line.startswith("Error:")), lines[0] if lines else "no reason given")
    lowered = message.lower()
    if "permission denied" in lowered or "operation not permitted" in lowered:
        return (f"not allowed to look into process {pid}: py-spy needs ptrace permission "
                f"(run as root, or set kernel.yama.ptrace_scope to 0): {text}")
    if not _alive(pid):
        return f"process {pid} is not running: {text}"
    return f"py-spy failed on process {pid}: {text}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
