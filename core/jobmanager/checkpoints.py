"""A streaming job's checkpoints, driven from its JobMaster's main thread.

The pure ``CheckpointCoordinator`` decides; this carries out what it says: a timer for
the next trigger and one for the timeout, ``TriggerCheckpoint`` to the source tasks,
the completed checkpoint's metadata written (on a worker thread: it is the commit
point, flushed to disk) before the tasks hear ``NotifyCheckpointComplete``, snapshots of
failed or subsumed checkpoints deleted (on a worker thread), and the tasks failed when
more checkpoints failed in a row than the job tolerates. The shared files of incremental
checkpoints go when no retained checkpoint names them (the store's registry), swept
after each subsumed checkpoint and once after a failover rebuilt the store from disk. A
restarted subtask is deployed with its state of the latest completed checkpoint
(``restore_of``).

Savepoints and stops (``savepoint``): the coordinator triggers one at once (or after the
checkpoint in progress); a savepoint is copied out into its folder on a worker thread
before it completes as a checkpoint; whoever asked is answered through a future, always:
with the savepoint, with why it failed, or when the job ends first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Any

from clusterdeck.core.checkpointing import (
    CheckpointCoordinator,
    CheckpointStorage,
    CheckpointStorageError,
    CheckpointTask,
    CompletedCheckpointStore,
    Savepoints,
    SubtaskAck,
)
from clusterdeck.core.checkpointing import instructions as ci
from clusterdeck.core.checkpointing.checkpoints import CheckpointRecord
from clusterdeck.core.checkpointing.storage import state_path
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.jobmanager.datapeers import fetch_unseen
from clusterdeck.core.jobmanager.resultfiles import chunk_size, read_chunk
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpoints import CheckpointOptions, StateHandle
from clusterdeck.core.protocol.gateways import TaskExecutorGateway
from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.protocol.wiring import DataEndpoint
from clusterdeck.core.rpc import MainThread, ScheduledCall

log = logging.getLogger(__name__)


def tasks_to_checkpoint(graph: ExecutionGraph) -> list[CheckpointTask]:
    """Every task a checkpoint waits for: the current attempt of each subtask that has not
    finished (a finished one's last state is in the checkpoint it took). Barriers start
    at the sources, and at every task whose producers all finished (Flink's checkpoints
    after tasks finished): no barrier can reach it any more, so it is triggered itself.
    Otherwise a consumer whose last checkpoint was aborted after its sources ended would
    wait for ever for one to complete."""
    return [CheckpointTask(execution.subtask_id, execution.attempt_id,
                           source=_starts_barriers(graph, execution.vertex_id),
                           running=execution.state is ExecutionState.RUNNING)
            for execution in graph.current_executions()
            if execution.state is not ExecutionState.FINISHED]


def _starts_barriers(graph: ExecutionGraph, vertex_id: str) -> bool:
    vertex = graph.vertex(vertex_id)
    return vertex.job_vertex.is_source or all(
        graph.vertex(edge.source).unfinished == 0 for edge in vertex.inputs)


def chain(source: Future[Any], target: Future[Any]) -> None:
    """``target`` completes as ``source`` does (on whichever thread completes it)."""
    def copy(done: Future[Any]) -> None:
        if done.exception() is not None:
            target.set_exception(done.exception())
        else:
            target.set_result(done.result())
    source.add_done_callback(copy)


def send_to_task(gateway: TaskExecutorGateway, message: Any) -> None:
    """A checkpoint's trigger, abort or completion to the TaskExecutor of its attempt."""
    if isinstance(message, p.TriggerCheckpoint):
        gateway.trigger_checkpoint(message)
    elif isinstance(message, p.NotifyCheckpointAborted):
        gateway.notify_checkpoint_aborted(message)
    else:
        gateway.notify_checkpoint_complete(message)


def _discard_and_sweep(storage: CheckpointStorage, job_id: str, checkpoint_ids: tuple[int, ...],
                       keep: tuple[str, ...], completed: int) -> None:
    """Worker thread: the subsumed checkpoints' files, then unreferenced shared files."""
    storage.discard(job_id, checkpoint_ids, keep)
    storage.sweep_shared(job_id, keep, completed)


class SavepointFailed(Exception):
    """A savepoint or stop that did not happen, and why (the job goes on, unless it ended)."""


class JobCheckpoints:
    def __init__(self, job_id: str, options: CheckpointOptions, storage: CheckpointStorage,
                 endpoint: MainThread, tasks: Callable[[], list[CheckpointTask]],
                 tell: Callable[[str, Any], None], fail: Callable[[str], None],
                 recovered: Iterable[Any] = (), savepoints: Savepoints | None = None,
                 graph: JobGraph | None = None) -> None:
        """``tasks()``: every task of the job now; ``tell(attempt_id, message)`` sends to
        the TaskExecutor running that attempt; ``fail(reason)`` fails the job's attempts
        (its restart strategy decides what then); ``savepoints`` and ``graph``: where
        savepoints of this job go, and the job they are of."""
        self.job_id = job_id
        self.storage = storage
        self._savepoints = savepoints
        self._graph = graph
        self._requester: Future[p.SavepointCompleted] | None = None
        self._endpoint = endpoint
        self._tasks = tasks
        self._tell = tell
        self._fail = fail
        store = CompletedCheckpointStore(options.retained, recovered)
        self.coordinator = CheckpointCoordinator(job_id, options, time.time(), store)
        self._timers: list[ScheduledCall] = []
        self._stopped = False
        self._storage_tail: Future[Any] | None = None  # the last storage work asked for
        self._fetching: dict[str, int] = {}  # attempt id -> its snapshots being fetched
        self._finished_while_fetching: dict[str, str] = {}  # attempt id -> subtask id
        surplus = store.recovered_surplus()
        self._discard(surplus)
        if not surplus and store.latest() is not None:  # what a dead JobManager left
            self._discard_ids((), store.referenced(), sweep=True)

    def start(self) -> None:
        self._arm()

    def stop(self, why: str = "the job ended") -> None:
        """The job ended: what is in progress never completes (its history says so)."""
        self._stopped = True
        for timer in self._timers:
            timer.cancel()
        self._carry_out(self.coordinator.abort_in_progress(time.time(), why))
        self._answer(error=f"{why} before the savepoint completed")

    def savepoint(self, stop: bool, savepoint: bool = True) -> Future[p.SavepointCompleted]:
        """Take a savepoint (``stop``: and stop the job's sources at it): answered once it
        is written, failed, or the job ended."""
        future: Future[p.SavepointCompleted] = Future()
        if savepoint and self._savepoints is None:
            future.set_exception(SavepointFailed("this job has no savepoint folder"))
            return future
        try:
            if self._stopped:
                raise ValueError("the job's checkpointing has stopped")
            self.coordinator.request_savepoint(stop, savepoint)
        except ValueError as error:
            future.set_exception(SavepointFailed(str(error)))
            return future
        self._requester = future
        self._arm()
        return future

    def history(self) -> tuple[CheckpointRecord, ...]:
        return self.coordinator.history()

    def restore_of(self, subtask_id: str) -> tuple[int, StateHandle | None]:
        """The latest completed checkpoint's id and ``subtask_id``'s snapshot in it (0 and
        None before any completed)."""
        latest = self.coordinator.latest()
        if latest is None:
            return 0, None
        return latest.checkpoint_id, latest.states.get(subtask_id)

    def snapshot_file(self, subtask_id: str, checkpoint_id: int, shared: str = ""
                      ) -> tuple[str, Path]:
        """The snapshot ``subtask_id`` restores from completed checkpoint ``checkpoint_id``
        (or the shared file ``shared`` its handle names) and where it lies here;
        ValueError when no retained checkpoint has it."""
        checkpoint = next((c for c in self.coordinator.store.all()
                           if c.checkpoint_id == checkpoint_id), None)
        handle = checkpoint.states.get(subtask_id) if checkpoint is not None else None
        if handle is None:
            raise ValueError(f"checkpoint {checkpoint_id} is not retained or holds no state "
                             f"of {subtask_id}")
        if not shared:
            return handle.path, self.storage.state_file(self.job_id, handle)
        file = next((file for file in handle.shared if file.path == shared), None)
        if file is None:
            raise ValueError(f"the state of {subtask_id} in checkpoint {checkpoint_id} names "
                             f"no {shared[:200]!r}")
        return file.path, self.storage.shared_file(self.job_id, file, subtask_id)

    def state_chunk(self, subtask_id: str, request: p.RequestStateChunk,
                    framesize: int) -> Future[p.JobFileChunk]:
        """A chunk of a file ``subtask_id`` restores from, read on a worker thread."""
        named, path = self.snapshot_file(subtask_id, request.checkpoint_id, request.shared)
        return self._endpoint.run_in_worker(read_chunk, self.job_id, named, str(path),
                                            request.offset, chunk_size(framesize),
                                            name="state-chunk")

    # -- events (main thread) ----------------------------------------------------------------

    def acknowledged(self, ack: p.AcknowledgeCheckpoint,
                     source: DataEndpoint | None = None) -> None:
        """``source``: the data service of the TaskManager that acknowledged, which has the
        snapshot when this machine does not see it (it is fetched before it counts)."""
        if ack.state is not None and ack.state.path != state_path(ack.checkpoint_id,
                                                                  ack.subtask_id):
            # a TaskManager vouches for its own subtask's snapshot, never another's
            self.declined(p.DeclineCheckpoint(
                ack.job_id, ack.attempt_id, ack.subtask_id, ack.checkpoint_id,
                f"its acknowledgement names {ack.state.path[:200]!r}, not its own snapshot"))
            return
        # Not here: its TaskManager does not share the work dir. It is fetched before the
        # acknowledgement counts, so that any TaskManager can restore from it and a
        # savepoint can copy it.
        try:
            files = [] if ack.state is None else [
                self.storage.state_file(self.job_id, ack.state),
                *(self.storage.shared_file(self.job_id, file, ack.subtask_id)
                  for file in ack.state.shared)]
        except CheckpointStorageError as error:  # over the size a restore would read
            self.declined(p.DeclineCheckpoint(ack.job_id, ack.attempt_id, ack.subtask_id,
                                              ack.checkpoint_id, str(error)))
            return
        unseen = [str(path) for path in files if not path.is_file()]
        if not unseen:
            self._count(ack)
            return
        self._fetching[ack.attempt_id] = self._fetching.get(ack.attempt_id, 0) + 1
        self._endpoint.on_main_thread(
            self._endpoint.run_in_worker(fetch_unseen, unseen, source,
                                         str(self.storage.root.parent), name="fetch-state"),
            lambda _none, error: self._fetched(ack, error))

    def _fetched(self, ack: p.AcknowledgeCheckpoint, error: BaseException | None) -> None:
        left = self._fetching.pop(ack.attempt_id) - 1
        if left:
            self._fetching[ack.attempt_id] = left
        if self._stopped:
            return
        if error is None:
            self._count(ack)
        else:
            self.declined(p.DeclineCheckpoint(
                ack.job_id, ack.attempt_id, ack.subtask_id, ack.checkpoint_id,
                f"its snapshot could not be fetched from its TaskManager: {error}"))
        finished = self._finished_while_fetching.pop(ack.attempt_id, None)
        if finished is not None and not left:
            self.task_finished(finished, ack.attempt_id)

    def _count(self, ack: p.AcknowledgeCheckpoint) -> None:
        self._carry_out(self.coordinator.acknowledge(
            ack.checkpoint_id, ack.subtask_id, ack.attempt_id,
            SubtaskAck(ack.state, ack.alignment, ack.duration), time.time()))

    def declined(self, decline: p.DeclineCheckpoint) -> None:
        self._carry_out(self.coordinator.decline(decline.checkpoint_id, decline.subtask_id,
                                                 decline.attempt_id, decline.reason,
                                                 time.time()))

    def task_finished(self, subtask_id: str, attempt_id: str) -> None:
        """Once its acknowledgements are counted: one still being fetched is not lost."""
        if self._fetching.get(attempt_id):
            self._finished_while_fetching[attempt_id] = subtask_id
            return
        self._carry_out(self.coordinator.task_finished(subtask_id, attempt_id, time.time()))

    def failing_over(self, reason: str) -> tuple[int, ...]:
        """Tasks failed: the checkpoint in progress will never complete; the ids of those
        aborted (for the job's chain of causes)."""
        instructions = self.coordinator.abort_in_progress(time.time(), reason)
        self._carry_out(instructions)
        return tuple(i.checkpoint_id for i in instructions
                     if isinstance(i, ci.CheckpointAborted))

    def _due(self) -> None:
        if self._stopped:
            return
        self._carry_out(self.coordinator.trigger(time.time(), self._tasks()))

    def _expire(self) -> None:
        if not self._stopped:
            self._carry_out(self.coordinator.expire(time.time()))

    # -- what the coordinator says ---------------------------------------------------------

    def _carry_out(self, instructions: list[ci.CheckpointInstruction]) -> None:
        for instruction in instructions:
            if isinstance(instruction, ci.TriggerCheckpoint):
                for attempt_id in instruction.sources:
                    self._tell(attempt_id, p.TriggerCheckpoint(
                        self.job_id, attempt_id, instruction.checkpoint_id,
                        instruction.timestamp, instruction.stop))
            elif isinstance(instruction, ci.CheckpointCompleted):
                self._commit(instruction)
            elif isinstance(instruction, ci.CheckpointAborted):
                log.warning("job %s: checkpoint %d failed: %s", self.job_id,
                            instruction.checkpoint_id, instruction.reason)
                for attempt_id in instruction.notify:  # a stopped source goes on
                    self._tell(attempt_id, p.NotifyCheckpointAborted(
                        self.job_id, attempt_id, instruction.checkpoint_id))
            elif isinstance(instruction, ci.WriteSavepoint):
                self._write_savepoint(instruction.checkpoint)
            elif isinstance(instruction, ci.SavepointDone):
                self._answer(instruction.checkpoint_id, instruction.path, instruction.error)
            elif isinstance(instruction, ci.DiscardStates):
                self._worker(self.storage.discard_states, self.job_id, instruction.states)
            elif isinstance(instruction, ci.DiscardCheckpoints):
                self._discard_ids(instruction.checkpoint_ids, instruction.keep)
            elif isinstance(instruction, ci.FailJob):
                self._fail(instruction.reason)
        self._arm()

    def _commit(self, completed: ci.CheckpointCompleted) -> None:
        """The metadata first (the commit point), then the tasks hear of it."""
        checkpoint = completed.checkpoint

        def written(_result: Any, error: BaseException | None) -> None:
            if error is not None:
                self._fail(f"checkpoint {checkpoint.checkpoint_id} completed but could not "
                           f"be recorded: {error}")
                return
            for attempt_id in completed.notify:
                self._tell(attempt_id, p.NotifyCheckpointComplete(
                    self.job_id, attempt_id, checkpoint.checkpoint_id))
        self._endpoint.on_main_thread(
            self._in_order(self.storage.commit, checkpoint, name="checkpoint"), written)

    def _write_savepoint(self, checkpoint: Any) -> None:
        """Copied out on a worker; it completes as a checkpoint once whole."""
        assert self._savepoints is not None and self._graph is not None
        checkpoint_id = checkpoint.checkpoint_id

        def written(path: Path | None, error: BaseException | None) -> None:
            if self._stopped:
                return
            self._carry_out(
                self.coordinator.savepoint_written(checkpoint_id, str(path), time.time())
                if error is None else
                self.coordinator.savepoint_not_written(checkpoint_id, str(error), time.time()))
        self._endpoint.on_main_thread(self._endpoint.run_in_worker(
            self._savepoints.write, checkpoint, self.storage, self._graph, name="savepoint"),
            written)

    def _answer(self, checkpoint_id: int = 0, path: str = "", error: str = "") -> None:
        future, self._requester = self._requester, None
        if future is None or future.done():
            return
        if error:
            future.set_exception(SavepointFailed(error))
        else:
            future.set_result(p.SavepointCompleted(self.job_id, checkpoint_id, path))

    def _discard(self, checkpoints: Iterable[Any]) -> None:
        self._discard_ids(tuple(c.checkpoint_id for c in checkpoints),
                          self.coordinator.store.referenced())

    def _discard_ids(self, checkpoint_ids: tuple[int, ...], keep: tuple[str, ...],
                     sweep: bool = False) -> None:
        """Delete the checkpoints, then the shared files no retained checkpoint names
        (``keep``) written for the latest completed one or before."""
        latest = self.coordinator.latest()
        if checkpoint_ids or sweep:
            self._worker(_discard_and_sweep, self.storage, self.job_id, checkpoint_ids, keep,
                         latest.checkpoint_id if latest is not None else 0)

    def _worker(self, fn: Callable[..., Any], *args: Any) -> None:
        """Deleting old state: a failure costs disk space, said in the log."""
        def done(_result: Any, error: BaseException | None) -> None:
            if error is not None:
                log.warning("job %s: old checkpoint state not deleted: %s", self.job_id, error)
        self._endpoint.on_main_thread(self._in_order(fn, *args, name="discard"), done)

    def _in_order(self, fn: Callable[..., Any], *args: Any, name: str) -> Future[Any]:
        """Storage work on a worker thread, each after the work asked for before it: a
        completed checkpoint's metadata is on disk before the one it subsumes is deleted,
        and a checkpoint subsumed at once is never deleted under its own commit (a commit
        into a folder gone failed the job under load)."""
        before = self._storage_tail

        def after_the_last() -> Any:
            if before is not None:
                wait([before])  # its outcome is its own caller's to read
            return fn(*args)
        self._storage_tail = self._endpoint.run_in_worker(after_the_last, name=name)
        return self._storage_tail

    def _arm(self) -> None:
        """Timers for what is next: the trigger, or the timeout of the one in progress."""
        for timer in self._timers:
            timer.cancel()
        self._timers = []
        if self._stopped:
            return
        now = time.time()
        expires = self.coordinator.expires()
        if expires is not None:
            self._timers.append(self._endpoint.schedule(max(0.0, expires - now), self._expire))
        due = self.coordinator.next_trigger()
        if due is not None:
            self._timers.append(self._endpoint.schedule(max(0.0, due - now), self._due))
