"""The data services of a job's TaskManagers, as its JobMaster knows them.

Each slot offer carries its TaskManager's data service and key (from the registration).
The JobMaster hands each consumer it deploys the endpoints of the TaskManagers that
wrote its inputs, each with a capability for this job's work dir only, and uses them
itself to fetch what a task left on a disk this machine cannot see (collected rows) before
the task counts as finished, so nothing the client needs lives only on a TaskManager.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from clusterdeck.core.dataservice.capability import capability
from clusterdeck.core.dataservice.client import FetchError, fetch_file
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.protocol.wiring import DataEndpoint, EdgeInput, StreamChannel
from clusterdeck.core.streaming.network import partition_capability


def files_the_client_reads(update: p.UpdateTaskExecutionState) -> tuple[str, ...]:
    """The files of a finished task the JobManager must have before the task counts."""
    result = update.result
    if update.state is not ExecutionState.FINISHED or result is None:
        return ()
    return tuple(path for path in (result.collected_path, result.stdout_path,
                                   result.stderr_path) if path)


class NoChannelServer(LookupError):
    """A streaming producer's TaskManager announced no channel server."""


class DataPeers:
    """Main thread of the JobMaster only."""

    def __init__(self, work_dir: str) -> None:
        self.work_dir = work_dir
        self._endpoints: dict[str, DataEndpoint] = {}
        self._channels: dict[str, tuple[str, int, str, str]] = {}  # host, port, print, key

    def offered(self, offer: p.OfferSlot) -> None:
        """Remember the offering TaskManager's data service (its latest registration's)."""
        if offer.data_url and offer.data_key:
            self._endpoints[offer.resource_id] = DataEndpoint(
                offer.resource_id, offer.data_url, offer.data_fingerprint,
                capability(offer.data_key, self.work_dir))
        host, _, port = offer.stream_address.rpartition(":")
        if host and port.isdigit() and offer.data_key:
            self._channels[offer.resource_id] = (host.strip("[]"), int(port),
                                                 offer.data_fingerprint, offer.data_key)

    def stream_channel(self, taskmanager_id: str | None, partition_id: str,
                       subpartition: int) -> StreamChannel:
        """Where a consumer reads ``subpartition`` of the partition a producer on
        ``taskmanager_id`` writes; NoChannelServer when that TaskManager has none."""
        found = self._channels.get(taskmanager_id or "")
        if found is None:
            raise NoChannelServer(f"TaskManager {taskmanager_id} announced no stream channel "
                                  f"server")
        host, port, fingerprint, key = found
        return StreamChannel(host, port, fingerprint, partition_id, subpartition,
                             partition_capability(key, partition_id), taskmanager_id or "")

    def endpoint(self, taskmanager_id: str | None) -> DataEndpoint | None:
        return self._endpoints.get(taskmanager_id or "")

    def for_inputs(self, inputs: Iterable[EdgeInput], consumer: str
                   ) -> tuple[DataEndpoint, ...]:
        """The endpoints of the TaskManagers (other than ``consumer``'s) whose partitions
        the inputs name: at most one per TaskManager, however many partitions."""
        producers = {ref.taskmanager_id for edge in inputs for ref in edge.partitions}
        producers.discard(consumer)
        return tuple(self._endpoints[t] for t in sorted(p for p in producers if p)
                     if t in self._endpoints)


def fetch_unseen(paths: Sequence[str], endpoint: DataEndpoint | None, root: str) -> None:
    """Worker thread: copy each of ``paths`` this machine cannot see from the TaskManager
    that wrote it; raises FetchError naming the first that cannot be had."""
    for path in paths:
        if os.path.isfile(path):
            continue
        if endpoint is None:
            raise FetchError(f"{os.path.basename(path)} is not on this machine and its "
                             f"TaskManager announced no data service")
        fetch_file(endpoint, root, path)
