"""A TaskManager's updates, taken on the JobMaster's main thread: a FINISHED one whose
task left files the client reads (collected rows, printed output) on a disk this machine
may not see is acknowledged at once but applied only once those files are fetched here
(on a worker thread), so a finished task's rows are never lost with its TaskManager. A
fetch that fails makes the update a failure of the attempt, and failover runs it again.

Only the FINISHED of an attempt that may still finish is fetched for: one that failed or
was replaced meanwhile (its TaskManager was lost during a network cut and reports again
after the heal) goes to the scheduler as it is, whose refusal, naming why, is the
TaskManager's answer; nothing of that attempt is fetched. One that failed while its
files were fetched is refused when the fetch ends, and those files are removed again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.jobmanager.datapeers import DataPeers, fetch_unseen, files_the_client_reads
from clusterdeck.core.jobmanager.reconciliation import ReconciliationRounds
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.rpc import MainThread

log = logging.getLogger(__name__)


class FinalUpdates:
    def __init__(self, graph: ExecutionGraph, data_peers: DataPeers, work_dir: Path,
                 endpoint: MainThread, reconciliation: ReconciliationRounds,
                 apply: Callable[[p.UpdateTaskExecutionState, BaseException | None],
                                 list[str]]) -> None:
        """``apply(update, fetch_error)`` hands the update to the scheduler and returns
        why it was refused (nothing: it was not)."""
        self.graph = graph
        self.data_peers = data_peers
        self.work_dir = work_dir
        self._endpoint = endpoint
        self._reconciliation = reconciliation
        self._apply = apply

    def take(self, update: p.UpdateTaskExecutionState) -> p.UpdateAcknowledged:
        unseen = files_the_client_reads(update)
        if not unseen or not self._may_finish(update.attempt_id):
            rejected = self._apply(update, None)
            return p.UpdateAcknowledged(update.attempt_id, not rejected, "; ".join(rejected))
        execution = self.graph.execution(update.attempt_id)
        host = execution.taskmanager_id if execution is not None else None
        self._reconciliation.fetching(update.attempt_id)
        self._endpoint.on_main_thread(
            self._endpoint.run_in_worker(fetch_unseen, unseen, self.data_peers.endpoint(host),
                                         str(self.work_dir), name="fetch"),
            lambda _none, error: self._fetched(update, unseen, error))
        return p.UpdateAcknowledged(update.attempt_id, True, "")

    def _may_finish(self, attempt_id: str) -> bool:
        """Whether ``attempt_id`` is its subtask's current attempt, on a TaskManager."""
        execution = self.graph.execution(attempt_id)
        return execution is not None and self.graph.is_current(execution) and \
            execution.state.can_become(ExecutionState.FINISHED)

    def _fetched(self, update: p.UpdateTaskExecutionState, files: tuple[str, ...],
                 error: BaseException | None) -> None:
        self._reconciliation.fetched(update.attempt_id)
        refused = self._apply(update, error)
        if refused:
            log.info("FINISHED of %s refused after its files were fetched (%s); removing "
                     "them", update.attempt_id, "; ".join(refused))
            self._endpoint.run_in_worker(_remove, files, name="forget")


def _remove(files: tuple[str, ...]) -> None:
    """Worker thread: the files of an attempt that is not current, gone."""
    for path in files:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as error:
            log.warning("could not remove %s of an attempt that is not current: %s", path,
                        error)
