"""CPU, memory and threads of a process with all its children (a TaskManager's Spark JVM
and Spark's Python workers count with it), for the recorder and the window alike.

psutil's ``cpu_percent`` measures since its previous call on the same Process object, so
the objects are kept between samples (a process first seen reads 0 %); those of processes
no longer seen are dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class TreeSample:
    cpu_percent: float  # of one core, summed over the tree
    rss: int            # bytes
    threads: int


class ProcessTrees:
    """Samples process trees by their root pids (one thread at a time)."""

    def __init__(self) -> None:
        self._known: dict[int, psutil.Process] = {}

    def watch(self, pid: int) -> None:
        """Start measuring ``pid`` now, so its first sample reads real CPU; raises
        psutil.Error when there is no such process."""
        self._process(pid).cpu_percent(None)

    def sample(self, roots: Iterable[int]) -> dict[int, TreeSample]:
        """Each root that still runs, with its tree summed."""
        samples: dict[int, TreeSample] = {}
        seen: set[int] = set()
        for pid in roots:
            try:
                root = self._process(pid)
                tree = [root, *(self._known.setdefault(child.pid, child)
                                for child in root.children(recursive=True))]
            except (psutil.Error, ValueError):
                continue
            cpu, rss, threads = 0.0, 0, 0
            for member in tree:
                try:
                    with member.oneshot():
                        cpu += member.cpu_percent(None)
                        rss += member.memory_info().rss
                        threads += member.num_threads()
                    seen.add(member.pid)
                except psutil.Error:
                    continue
            samples[pid] = TreeSample(cpu, rss, threads)
        self._known = {pid: process for pid, process in self._known.items() if pid in seen}
        return samples

    def _process(self, pid: int) -> psutil.Process:
        process = self._known.get(pid)
        if process is None or not process.is_running():  # gone, or its pid reused
            process = self._known[pid] = psutil.Process(pid)
        return process
