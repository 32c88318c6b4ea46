"""CPU, memory and threads of the cluster's processes on this machine, once a second.

Which processes: those whose presence (``presence/<service>``, with pid and host) the
recorder saw online on this host, and the recorder itself. A process that is gone is
dropped; a restarted one announces its new pid. Each counts with its children (a
TaskManager's Spark JVM and its Python workers), as the window's own sampler counts it.
"""

from __future__ import annotations

import os
import socket

import psutil

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.recorder.store import Message, Sample
from clusterdeck.core.rpc import RpcError, decode

PRESENCE_LIMIT = 64 * 1024  # a presence is a few hundred bytes


class ProcessSampler:
    def __init__(self, host: str | None = None) -> None:
        self.host = host or socket.gethostname()
        self._watched: dict[str, psutil.Process] = {}
        # Children by pid, kept between samples: cpu_percent measures since the last call
        # on the same object.
        self._children: dict[int, psutil.Process] = {}
        self._watch("recorder", os.getpid())

    def saw(self, message: Message) -> None:
        """Follow presence messages: who runs here, under which pid."""
        if not message.topic.startswith("presence/") or not message.payload:
            return
        try:
            presence = decode(message.payload, PRESENCE_LIMIT).message
        except RpcError:
            return
        if not isinstance(presence, p.Presence) or presence.host != self.host:
            return
        if presence.status is p.PresenceStatus.ONLINE:
            self._watch(presence.service_id, presence.pid)
        else:
            self._watched.pop(presence.service_id, None)

    def _watch(self, name: str, pid: int) -> None:
        known = self._watched.get(name)
        if known is not None and known.pid == pid:
            return
        try:
            process = psutil.Process(pid)
            process.cpu_percent(None)  # the first reading only starts the interval
        except (psutil.Error, ValueError):
            return
        self._watched[name] = process

    def sample(self, now: float) -> list[Sample]:
        samples, seen = [], set()
        for name, process in list(self._watched.items()):
            try:
                tree = [process, *(self._children.setdefault(child.pid, child)
                                   for child in process.children(recursive=True))]
            except psutil.Error:
                del self._watched[name]
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
            samples.append(Sample(now, name, cpu, rss, threads))
        self._children = {pid: c for pid, c in self._children.items() if pid in seen}
        return samples
