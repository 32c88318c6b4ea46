"""The flame graph of one vertex: py-spy over exactly the processes and threads running its
subtasks now, merged into one (docs/profiling.md, "One vertex's workers").

Where a subtask runs comes with its attempt's live numbers (``AttemptMetrics.workers``):
its TaskManager's slot thread (a pid and a native thread id: the TaskManager's other
threads and slots are left out) and whole processes: for a streaming subtask the Spark
Python worker of its long-lived Spark task, for a batch subtask the pooled Spark Python
workers running its records now (core/engine/workermarks.py). ``vertex_workers`` reads them from the
numbers heard; ``vertex_flame_graph`` samples each process once, all at the same time,
with py-spy's ``--threads`` (each stack then begins with ``thread (TID): NAME``), keeps
the stacks of the threads asked for, drops that first frame, and adds the rest to one
tree: the same function of two subtasks is one box, and graphs of two runs (other pids)
compare frame by frame (flamediff.py).

Only processes of this machine can be sampled: a subtask whose TaskManager is on another
machine is named in ``missed``, as is a worker that ended while it was sampled.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.core.profiling.pyspy import (
    DUMP_TIMEOUT,
    MAX_SECONDS,
    MAX_STACKS,
    FlameNode,
    ProfilingError,
    pyspy_binary,
    run_pyspy,
)
from clusterdeck.core.protocol.ids import epoch_of
from clusterdeck.core.protocol.metrics import ATTEMPT_WORKERS, AttemptMetrics

MAX_WORKERS = 64  # processes and threads of one vertex sampled at once
_THREAD_FRAME = re.compile(r"^thread \((0x[0-9a-fA-F]+|\d+)\)(?::.*)?$")


@dataclass(frozen=True)
class VertexWorker:
    """A process (``thread`` 0) or one thread of one running a subtask of the vertex."""

    taskmanager_id: str
    subtask: int
    pid: int
    thread: int = 0

    @property
    def label(self) -> str:
        where = f"thread {self.thread} of pid {self.pid}" if self.thread else f"pid {self.pid}"
        return f"subtask {self.subtask + 1} on {self.taskmanager_id} ({where})"


@dataclass(frozen=True)
class VertexFlameGraph:
    vertex: str
    seconds: float
    rate: int
    root: FlameNode
    sampled: tuple[VertexWorker, ...]
    missed: tuple[str, ...]  # why a worker is not in it, one sentence each
    stacks: int
    cut: bool  # more than MAX_STACKS distinct stacks: the rest are not in it


def vertex_workers(numbers: Iterable[tuple[str, AttemptMetrics]], job_id: str,
                   vertex_id: str) -> list[VertexWorker]:
    """Who runs the vertex's subtasks now, from (TaskManager id, AttemptMetrics) pairs in
    the order heard: per subtask its newest running attempt's workers (an ended attempt
    has none). Numbers are data: a pid that is not positive, a negative thread, more than
    ATTEMPT_WORKERS of one attempt or MAX_WORKERS in all are left out."""
    newest: dict[int, tuple[str, AttemptMetrics]] = {}
    for taskmanager_id, attempt in numbers:
        if attempt.job_id != job_id or attempt.vertex_id != vertex_id:
            continue
        held = newest.get(attempt.subtask)
        if held is None or _order(attempt) >= _order(held[1]):
            newest[attempt.subtask] = (taskmanager_id, attempt)
    found: dict[tuple[int, int], VertexWorker] = {}
    for subtask in sorted(newest):
        taskmanager_id, attempt = newest[subtask]
        if attempt.final:
            continue
        for worker in attempt.workers[:ATTEMPT_WORKERS]:
            if worker.pid > 0 and worker.thread >= 0 and len(found) < MAX_WORKERS:
                found.setdefault((worker.pid, worker.thread), VertexWorker(
                    taskmanager_id, subtask, worker.pid, worker.thread))
    return list(found.values())


def _order(attempt: AttemptMetrics) -> tuple[int, int, int]:
    """Later runs and attempts first; of one attempt, its last numbers over a late report
    of it running."""
    return epoch_of(attempt.attempt_id) or 0, attempt.attempt, 1 if attempt.final else 0


def on_this_machine(workers: Iterable[VertexWorker], hosts: Mapping[str, str],
                    here: str) -> tuple[list[VertexWorker], list[str]]:
    """The workers whose TaskManager runs on ``here`` (its host name), and a sentence for
    each TaskManager that does not (py-spy sees this machine's processes only)."""
    local: list[VertexWorker] = []
    away: dict[str, str] = {}
    for worker in workers:
        host = hosts.get(worker.taskmanager_id)
        if host in (here, ""):
            local.append(worker)
        else:
            away[worker.taskmanager_id] = (
                f"{worker.taskmanager_id} runs on {host}: its subtasks are not in this "
                f"graph (run clusterdeck profile there)" if host else
                f"{worker.taskmanager_id} is not in the cluster's overview: its subtasks "
                "are not in this graph")
    return local, list(away.values())


def vertex_flame_graph(vertex: str, workers: Iterable[VertexWorker], seconds: float = 5.0,
                       rate: int = 100) -> VertexFlameGraph:
    """Sample every process of ``workers`` for ``seconds``, all at once, and merge the
    stacks of the threads asked for. Raises ProfilingError when none could be sampled."""
    seconds = max(0.5, min(MAX_SECONDS, seconds))
    chosen = list(workers)[:MAX_WORKERS]
    if not chosen:
        raise ProfilingError(f"no subtask of {vertex} is running on this machine now")
    by_pid: dict[int, list[VertexWorker]] = {}
    for worker in chosen:
        by_pid.setdefault(worker.pid, []).append(worker)
    with ThreadPoolExecutor(len(by_pid), thread_name_prefix="clusterdeck-pyspy") as pool:
        recorded = {pid: pool.submit(_record, pid, seconds, rate) for pid in by_pid}
    root = FlameNode(vertex)
    sampled: list[VertexWorker] = []
    missed: list[str] = []
    stacks, cut = 0, False
    for pid, future in recorded.items():
        error = future.exception()
        if error is not None:
            missed.append(f"{', '.join(w.label for w in by_pid[pid])}: {error}")
            continue
        threads = _threads_of(by_pid[pid])
        read, cut_here = add_stacks(root, future.result(), threads, MAX_STACKS - stacks)
        stacks += read
        cut = cut or cut_here
        sampled += by_pid[pid]
    if not sampled:
        raise ProfilingError(f"no worker of {vertex} could be sampled: " + "; ".join(missed))
    return VertexFlameGraph(vertex, seconds, rate, root, tuple(sampled), tuple(missed),
                            stacks, cut)


def _threads_of(workers: list[VertexWorker]) -> frozenset[int] | None:
    """The threads to keep of one process: None for all of them."""
    if any(worker.thread == 0 for worker in workers):
        return None
    return frozenset(worker.thread for worker in workers)


def add_stacks(root: FlameNode, text: str, threads: frozenset[int] | None,
               most: int = MAX_STACKS) -> tuple[int, bool]:
    """Add py-spy's raw ``--threads`` output to ``root``: the stacks of ``threads`` (None:
    of every thread), their thread frame dropped. Lines that are not ``stack count``, and
    stacks of other threads, are skipped. Returns the stacks added and whether ``most``
    cut them short."""
    added = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        if frames and frames[0].startswith("process "):  # --subprocesses: not asked here
            frames = frames[1:]
        match = _THREAD_FRAME.match(frames[0]) if frames else None
        if match is None:
            continue  # every stack of --threads begins with its thread
        if threads is not None and int(match.group(1), 0) not in threads:
            continue
        if added == most:
            return added, True
        root.add(frames[1:], int(count))
        added += 1
    return added, False


def _record(pid: int, seconds: float, rate: int) -> str:
    """py-spy's raw output of ``pid`` over ``seconds``, each stack under its thread."""
    with tempfile.TemporaryDirectory(prefix="clusterdeck-profile-") as folder:
        out = Path(folder) / "stacks.txt"
        run_pyspy([pyspy_binary(), "record", "--pid", str(pid), "--format", "raw", "--threads",
              "--duration", str(max(1, round(seconds))), "--rate", str(rate),
              "--output", str(out), "--nonblocking"], pid, seconds + DUMP_TIMEOUT)
        return out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
