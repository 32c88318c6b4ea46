"""CPU and memory of the cluster's processes, sampled off the GUI thread.

psutil calls are cheap but not free (a TaskManager's Spark JVM is a child whose numbers
count too), so one daemon thread samples every watched pid once per interval and hands
the result to a callback (the bridge), never touching Qt itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from clusterdeck.core.node.processtree import ProcessTrees


@dataclass(frozen=True)
class ResourceSample:
    """One process tree's load: CPU in percent of one core, resident memory in bytes."""

    pid: int
    cpu_percent: float
    memory_bytes: int


SampleSink = Callable[[dict[int, ResourceSample]], None]


class ResourceSampler:
    """Samples the process trees of the watched pids on its own thread.

    ``watch`` may be called from any thread; ``sink`` is called on the sampler's thread.
    Each tree is summed by core/node/processtree.py (the first sample of a pid reads 0 %).
    """

    def __init__(self, sink: SampleSink, interval: float = 1.0) -> None:
        self._sink = sink
        self._interval = interval
        self._lock = threading.Lock()
        self._pids: frozenset[int] = frozenset()
        self._trees = ProcessTrees()  # the sampler thread's
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, pids: Iterable[int]) -> None:
        with self._lock:
            self._pids = frozenset(pid for pid in pids if pid)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="clusterdeck-gui-sampler",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self._interval)
            self._thread = None

    def _run(self) -> None:
        """The sampler thread."""
        while not self._stop.wait(self._interval):
            with self._lock:
                pids = self._pids
            self._sink({pid: ResourceSample(pid, tree.cpu_percent, tree.rss)
                        for pid, tree in self._trees.sample(pids).items()})
