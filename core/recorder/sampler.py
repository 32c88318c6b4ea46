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

from clusterdeck.core.node.processtree import ProcessTrees
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.recorder.store import Message, Sample
from clusterdeck.core.rpc import RpcError, decode

PRESENCE_LIMIT = 64 * 1024  # a presence is a few hundred bytes


class ProcessSampler:
    def __init__(self, host: str | None = None) -> None:
        self.host = host or socket.gethostname()
        self._watched: dict[str, int] = {}  # process name -> pid
        self._trees = ProcessTrees()
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
        if self._watched.get(name) == pid:
            return
        try:
            self._trees.watch(pid)  # the first reading only starts the interval
        except (psutil.Error, ValueError):
            return
        self._watched[name] = pid

    def sample(self, now: float) -> list[Sample]:
        trees = self._trees.sample(self._watched.values())
        for name in [name for name, pid in self._watched.items() if pid not in trees]:
            del self._watched[name]  # gone
        return [Sample(now, name, trees[pid].cpu_percent, trees[pid].rss, trees[pid].threads)
                for name, pid in self._watched.items()]
