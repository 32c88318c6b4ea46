"""One streaming subtask: a task that runs until its input ends (or for ever), taking its
records in batches from its replayable source or from the exchange with the vertex
before it, running each batch through its operators (``StreamChain``: its Spark task,
keyed state and windows in the task) into its sink or the exchange to the next vertex,
and taking part in checkpoints (docs/streaming.md). Its keyed state is in its memory, or
in an embedded RocksDB of its own with the ``rocksdb`` state backend, whose change log
each snapshot hands to the writer (an incremental checkpoint) and which a restore fills
from the checkpoint's chain of shared files.

Barriers. A source task's barrier is the JobMaster's trigger: between two batches
nothing is in flight inside the chain, so it copies its state (source position, chain
state, sink's pending files), sends barrier *n* after the records it emitted, and
acknowledges once a worker thread wrote the copy (snapshotwriter.py), as Flink's
synchronous and asynchronous parts of a snapshot.
A task reading the exchange snapshots when barrier *n* came on every input
(``GateInput``: aligned for exactly-once, so each input's records after its barrier
wait), then sends the barrier on. When the JobMaster says *n* completed, the sink
commits.

Ends. A counted source ends: it fires every open window (watermark infinity), takes part
in one more checkpoint (its final one), and once that completed, ends its output and
finishes; a task reading the exchange finishes once every input ended and its last
checkpoint completed. A stop's barrier (``stop``) ends a source at that checkpoint the
same way; if the checkpoint is aborted instead, the source goes on.

Runs on the slot thread; checkpoint messages come from the TaskExecutor's main thread
through ``control``, acknowledgements go back through ``report``.
"""

from __future__ import annotations

import json
import math
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.checkpointing.alignment import AbortCheckpoint, TakeSnapshot
from clusterdeck.core.checkpointing.changelog import chain_entries
from clusterdeck.core.checkpointing.snapshotwriter import SnapshotWriter, SnapshotWritten
from clusterdeck.core.engine.arrowbuffers import elements_of
from clusterdeck.core.engine.cancellation import attempt_scope
from clusterdeck.core.engine.keyedstate import NOT_ON_HEAP, decoded
from clusterdeck.core.engine.liveoutput import LiveOutput
from clusterdeck.core.engine.records import text_line
from clusterdeck.core.engine.rescaling import (
    OldPart,
    Rescaled,
    counted,
    heap_or_stored,
    state_format_error,
)
from clusterdeck.core.engine.runtime import SubtaskResult, failure_of
from clusterdeck.core.engine.streamio import GateInput, PartitionOutput, merged
from clusterdeck.core.engine.streamoperators import Batch, StreamChain, output_key
from clusterdeck.core.engine.streamparts import (
    SINKS,
    SOURCES,
    ClusterBroker,
    ColumnarSource,
    Printed,
    StreamSink,
    StreamSource,
    open_sink,
    open_source,
)
from clusterdeck.core.engine.tally import LiveCounts
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.errors import SubtaskCancelled, SubtaskFailed
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpoints import StateHandle
from clusterdeck.core.protocol.ids import attempt_part_of, subtask_id
from clusterdeck.core.streaming.network import ChannelServer
from clusterdeck.core.streaming.statebackend import (
    KeyedStore,
    StateBackend,
    StateBackendOptions,
    stored_counts,
)

BATCH_RECORDS = 2000  # records a batch holds at most (fewer for slow operators: StreamChain)
COLUMN_BATCH_RECORDS = 20_000
"""Rows a column batch holds at most (columnbatches.py): its cost is mostly per batch
(a round trip to the Spark task, a few Arrow calls), not per row, so it may be ten times
larger; StreamChain.batch_limit still keeps its work near ``BATCH_SECONDS``."""
IDLE_WAIT = 0.1       # seconds a task with nothing due waits for a message at most
BATCH_INTERVAL = 0.02
"""Seconds a task gathers records into one batch at most (Flink's buffer timeout): a
batch costs a round trip to the attempt's long-lived Spark task (under a millisecond,
continuous.py), not a Spark job of tens of milliseconds, so batches go five times sooner
than Flink's default 100 ms, and a full one (at high rates) at once. At 2,000 records
that round trip is 4% of the batch's work; larger batches would only
hold more memory and keep barriers waiting longer (docs/benchmarks.md, "Streaming
batches in Spark")."""

Report = Callable[[Any], None]


def run_stream_subtask(spark: Any, job: LoadedJob, deployment: p.SubmitTask,
                       control: queue.SimpleQueue[Any], report: Report,
                       storage: CheckpointStorage,
                       counts: LiveCounts | None = None, *, live: LiveOutput | None = None,
                       printed: Path | None = None,
                       channels: ChannelServer | None = None,
                       broker: ClusterBroker | None = None,
                       backend: StateBackendOptions | None = None) -> SubtaskResult:
    """Run the subtask until its final checkpoint completed; raises SubtaskCancelled
    once cancelled, SubtaskFailed when its user code, its files or its exchanges fail.
    ``printed``: the attempt's output file, where a print sink writes (and to ``live`` as
    it does); ``channels``: its TaskManager's channel server, for its exchanges;
    ``broker``: the cluster's broker with its TaskManager's login, for MQTT sources and
    sinks; ``backend``: where its keyed state lives (its memory by default)."""
    started = time.monotonic()
    feed = (lambda text: live.write("stdout", text)) if live is not None else None
    task = _StreamTask(spark, job, deployment, report,
                       SnapshotWriter(storage, deployment.job_id,
                                      subtask_id(deployment.vertex_id, deployment.subtask),
                                      control),
                       counts or LiveCounts(),
                       Printed(printed, feed) if printed is not None else None, broker,
                       backend)
    task.counts.spark_worker = task.chain.worker_pid  # for its vertex's flame graph
    vertex = job.graph.vertex(deployment.vertex_id)
    description = f"{job.graph.name}: {vertex.name} ({deployment.subtask + 1}/" \
                  f"{vertex.parallelism})"
    with attempt_scope(spark.sparkContext, deployment.attempt_id, description) as (
            cancelled, _group):
        try:
            task.chain.start()  # its Spark task starts while the task connects, restores
            task.connect(job, channels, cancelled)
            task.restore()
            while not task.finished:
                if cancelled():
                    raise SubtaskCancelled(deployment.attempt_id)
                task.step(control)
            task.finish()
        except (SubtaskCancelled, SubtaskFailed) as error:
            task.close(str(error))
            raise
        except Exception as error:
            task.close(str(error))
            raise failure_of(error, deployment.vertex_id, deployment.subtask,
                             deployment.attempt_id) from error
    output = task.sink.output() if task.sink is not None else None
    return SubtaskResult(deployment.vertex_id, deployment.subtask, deployment.attempt_id,
                         task.counts.records_in, task.counts.records_out,
                         counters=task.chain.counters,
                         sink_files={task.sink_id: list(output.files)} if output else {},
                         stdout=output.stdout_tail if output else "",
                         stdout_file=output.stdout_file if output else "",
                         duration=time.monotonic() - started)


class _StreamTask:
    """The state of one streaming attempt (slot thread only)."""

    def __init__(self, spark: Any, job: LoadedJob, deployment: p.SubmitTask, report: Report,
                 writer: SnapshotWriter, counts: LiveCounts,
                 printed: Printed | None = None, broker: ClusterBroker | None = None,
                 backend: StateBackendOptions | None = None) -> None:
        self.deployment = deployment
        self.report = report
        self.writer = writer
        self.storage = writer.storage
        self.counts = counts
        vertex = job.graph.vertex(deployment.vertex_id)
        first, last = vertex.operators[0], vertex.operators[-1]
        self.subtask_id = subtask_id(deployment.vertex_id, deployment.subtask)
        self.attempt = attempt_part_of(deployment.attempt_id)  # a3, or e1a3 after failover
        # Fresh and untouched until ``restore`` (no file is read or written before it)
        self.source: StreamSource | None = open_source(
            first, deployment.subtask, deployment.parallelism, broker,
            f"{deployment.job_id}.{deployment.vertex_id}") if first.kind in SOURCES else None
        self.sink: StreamSink | None = open_sink(
            last, deployment.subtask, deployment.parallelism, self.attempt, printed,
            broker) if last.kind in SINKS else None
        self.sink_id = last.id
        keyed = any(op.kind in plan.STREAMING_KEYED for op in vertex.operators)
        self.keyed, self.vertex = keyed, vertex
        self.max_parallelism = job.graph.max_parallelism
        backend = backend or StateBackendOptions()
        self.store = KeyedStore(backend.memory, backend.folder) \
            if keyed and backend.backend is StateBackend.ROCKSDB else None
        self.chain = StreamChain(spark, job, vertex, deployment.subtask,
                                 deployment.parallelism, store=self.store)
        self.input: GateInput | None = None
        self.output: PartitionOutput | None = None
        self.watermark: float | None = None  # the last one sent on
        self.drained = False  # a source's input ended and its windows fired
        self.last_snapshot: int | None = None
        self.committed = 0  # the newest checkpoint known complete
        self.final: int | None = None  # the checkpoint after which nothing more comes
        self.triggered = 0  # a trigger that came to this consumer before its inputs ended
        self.stopping: int | None = None  # a stop's checkpoint: no record after its barrier
        self.done = False
        self.batch_started = 0.0  # monotonic time of the last source batch

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Done, and no snapshot still being written: a snapshot taken after the last
        committed one (the source got the next trigger meanwhile) is acknowledged before
        the task ends, or its consumers would wait for that checkpoint for ever."""
        return self.done and self.writer.pending == 0

    def connect(self, job: LoadedJob, channels: ChannelServer | None,
                cancelled: Callable[[], bool]) -> None:
        """Serve its output partition (named by this attempt) and open its input gate."""
        deployment, graph = self.deployment, job.graph
        outputs = graph.outputs_of(deployment.vertex_id)
        needs = bool(outputs) or (self.source is None)
        if needs and channels is None:
            raise RuntimeError("this TaskManager runs no stream channel server")
        if outputs:
            assert channels is not None
            consumers = graph.vertex(outputs[0].target).parallelism
            self.output = PartitionOutput(channels, deployment.attempt_id, consumers,
                                          output_key(job, graph, deployment.vertex_id),
                                          cancelled, graph.max_parallelism)
            output = self.output  # its backpressure, read live for the live numbers
            self.counts.consumers_waited = lambda: output.backpressured
        if self.source is None:
            assert channels is not None and graph.checkpointing is not None
            if not deployment.stream_inputs:
                raise RuntimeError(f"{self.subtask_id} reads an exchange but its deployment "
                                   f"names no input channels")
            self.input = GateInput(deployment.stream_inputs, graph.checkpointing.mode,
                                   loop=channels.loop, consumer=channels.owner,
                                   columnar=self.chain.takes_columns,
                                   connect_timeout=channels.connect_timeout)

    def restore(self) -> None:
        """From the deployment's checkpoint (its state read and checked), or afresh: the
        file sink drops whatever an earlier attempt left uncommitted either way. The sink
        first: it commits what the checkpoint holds even when the rest then fails."""
        deployment = self.deployment
        data: dict[str, Any] = {}
        handle = deployment.restore_state
        if handle is not None:
            data = json.loads(self.storage.read_state(deployment.job_id, handle))
            if "rescaled" in data:  # the first restore after a rescale
                data = self._rescaled(data["rescaled"], handle)
            elif self.keyed and data.get("max_parallelism") != self.max_parallelism:
                raise ValueError(state_format_error(data.get("max_parallelism"),
                                                    self.max_parallelism))
        if self.sink is not None:
            self.sink.restore(data.get("sink"))
        if self.source is not None:
            self.source.restore(data.get("source"))
        if handle is not None and handle.shared and "rescaled" not in data:
            if self.store is None:
                raise ValueError(NOT_ON_HEAP)
            self.store.apply(chain_entries(self.storage, deployment.job_id, self.subtask_id,
                                           handle.shared))
            self.writer.restored(handle.shared)
        self.chain.restore(data.get("chain"))
        self.committed = deployment.restore_checkpoint

    def _rescaled(self, rescaled: dict[str, Any], handle: StateHandle) -> dict[str, Any]:
        """The state of this subtask made from every old subtask's (rescaling.py); a
        ``rocksdb`` store filled with the entries of its key groups meanwhile. Marked
        ``rescaled``: the handle's shared files are the old chains, not this store's."""
        deployment = self.deployment
        if rescaled["max_parallelism"] != self.max_parallelism:
            raise ValueError(state_format_error(rescaled["max_parallelism"],
                                                self.max_parallelism))
        storage, job_id, subtask_id = self.storage, deployment.job_id, self.subtask_id

        def entries(indices: list[int]) -> Callable[[], Any]:
            chain = tuple(handle.shared[index] for index in indices)
            return lambda: chain_entries(storage, job_id, subtask_id, chain)

        parts = [OldPart(part["subtask"], part["state"], entries(part["shared"]))
                 for part in rescaled["parts"]]
        made = Rescaled(parts, deployment.subtask, deployment.parallelism,
                        self.max_parallelism)
        chain = made.chain()
        if chain is not None and self.store is not None:
            self.store.clear()
            self.store.write(made.stored_entries(decoded))  # logged: the next delta has all
            chain = counted(chain, *stored_counts(self.store))
        elif chain is not None and any(heap_or_stored(chain.get(part))
                                       for part in ("windows", "running", "values")):
            raise ValueError(NOT_ON_HEAP)
        vertex = self.vertex
        return {"rescaled": True, "chain": chain,
                "source": made.source(vertex.operators[0]) if self.source else None,
                "sink": made.sink(vertex.operators[-1]) if self.sink else None}

    def finish(self) -> None:
        """Done: the consumers' inputs from this task end; the gate closes; the source
        and sink let go of their connections."""
        self._release()
        if self.output is not None:
            self.output.finish()
        if self.input is not None:
            self.input.close()

    def close(self, reason: str) -> None:
        """Failed or cancelled: what is in progress stays uncommitted; the consumers hear
        that this partition is gone."""
        self._release()
        if self.output is not None:
            self.output.release(reason[:200])
        if self.input is not None:
            self.input.close()

    def _release(self) -> None:
        self.chain.close()  # its long-lived Spark task ends with the attempt
        self.writer.close()
        if self.store is not None:
            self.store.close()
        if self.sink is not None:
            self.sink.close()
        if self.source is not None:
            self.source.close()

    # -- one step -----------------------------------------------------------------------------

    def step(self, control: queue.SimpleQueue[Any]) -> None:
        """Handle the messages that came, then run one batch or wait a little."""
        if self.input is not None:
            self._from_input()
            wait = 0.0
        else:
            wait = self._from_source()
        waited = time.monotonic()
        for message in _messages(control, wait):
            self._handle(message)
        if wait > 0:  # the task's busy share: it had nothing to do meanwhile
            self.counts.idle += time.monotonic() - waited

    def _from_source(self) -> float:
        """One batch of the source; how long to wait for messages after it."""
        assert self.source is not None
        self._drain_if_exhausted()
        if self.source.exhausted or self.stopping is not None:
            return IDLE_WAIT
        gathering = self.batch_started + BATCH_INTERVAL - time.monotonic()
        if gathering > 0:
            return gathering  # messages meanwhile; the source's records wait to be a batch
        now = time.time()
        columnar = self.source if isinstance(self.source, ColumnarSource) \
            and self.chain.takes_columns else None
        limit = self.chain.batch_limit(COLUMN_BATCH_RECORDS if columnar else BATCH_RECORDS)
        batch: Batch
        if columnar is not None:
            batch = columnar.poll_columns(now, limit)
        else:
            batch = [(None, record) for record in self.source.poll(now, limit)]
        if not len(batch):
            return min(IDLE_WAIT, self.source.seconds_to_next(now))
        full = len(batch) >= limit
        self.batch_started = 0.0 if full else time.monotonic()  # a full one: more at once
        self._through(batch)
        self._advance(None)
        self._drain_if_exhausted()
        return 0.0

    def _drain_if_exhausted(self) -> None:
        """The source's last record went: the end of its event time, so every window
        fires now, before the barrier of its final checkpoint (whatever fired after that
        barrier would never be committed)."""
        if self.source is not None and self.source.exhausted and not self.drained:
            self.drained = True
            self._advance(math.inf)

    def _from_input(self) -> None:
        """Records from the exchange until the next event, then what that event says."""
        assert self.input is not None
        most = COLUMN_BATCH_RECORDS if self.input.columnar else BATCH_RECORDS
        polled = self.input.poll(IDLE_WAIT, self.chain.batch_limit(most), BATCH_INTERVAL)
        # waiting for buffers is not work, also while a batch gathers (at a low rate a
        # poll that gets one record lingers for more: counted busy, the share was ~1)
        self.counts.idle += polled.waited
        if polled.elements:
            self._through(polled.elements)
        if polled.batches:
            self._through(merged(polled.batches))
        if polled.watermark is not None:
            self._advance(polled.watermark)
        for action in polled.actions:
            if isinstance(action, TakeSnapshot):
                self._snapshot(action.checkpoint_id, action.alignment)
            elif isinstance(action, AbortCheckpoint):
                self._decline(action.checkpoint_id, action.reason)
        if polled.ended and self.final is None:
            # producers end only after their final checkpoint, whose barrier came first
            self.final = self.last_snapshot or 0
            if self.triggered > self.final:  # a trigger came before the end: take it now
                self._triggered_consumer(self.triggered)
            self.done = self.committed >= self.final

    def _through(self, elements: Batch) -> None:
        self.counts.records_in += len(elements)
        processed = self.chain.process(elements)
        if self.output is None:
            self._emit(processed)
            return
        waited = self.output.backpressured
        self._emit(processed)
        self.chain.output_waited(self.output.backpressured - waited, len(elements))

    def _advance(self, watermark: float | None) -> None:
        fired, outgoing = self.chain.advance(watermark)
        self._emit(fired)
        if outgoing is not None and outgoing != self.watermark:
            self.watermark = self.counts.watermark = outgoing  # for the live numbers
            if self.output is not None:
                self.output.watermark(outgoing)

    def _emit(self, elements: Batch) -> None:
        if not len(elements):
            return
        self.counts.records_out += len(elements)
        if self.output is not None and isinstance(elements, pa.RecordBatch):
            self.output.emit_columns(elements)
        elif self.output is not None:
            self.output.emit(elements)
        elif isinstance(elements, pa.RecordBatch):
            self._emit(elements_of(elements))
        elif self.sink is not None:
            self.sink.write(text_line(record) for _, record in elements)

    # -- checkpoints --------------------------------------------------------------------------

    def _handle(self, message: Any) -> None:
        if isinstance(message, p.TriggerCheckpoint):
            if self.source is None:
                self._triggered_consumer(message.checkpoint_id)
            elif self._snapshot(message.checkpoint_id, 0.0) and message.stop:
                self.stopping = message.checkpoint_id
        elif isinstance(message, p.NotifyCheckpointComplete):
            self.committed = max(self.committed, message.checkpoint_id)
            if self.sink is not None:
                self.sink.committed(message.checkpoint_id)
            if self.source is not None:  # an MQTT source acknowledges what it covers
                self.source.committed(message.checkpoint_id)
            if any(last is not None and message.checkpoint_id >= last
                   for last in (self.final, self.stopping)):
                self.done = True
        elif isinstance(message, SnapshotWritten):
            self._written(message)
        elif isinstance(message, p.NotifyCheckpointAborted) \
                and self.stopping == message.checkpoint_id:  # the stop failed: go on
            self.stopping = None

    def _triggered_consumer(self, checkpoint_id: int) -> None:
        """A task reading the exchange is triggered once its producers all finished (no
        barrier can reach it any more). Its inputs' end may still be on the way behind
        their last records: then it takes the snapshot when the end came. Either way it
        ends with this checkpoint now."""
        if self.final is None:
            self.triggered = max(self.triggered, checkpoint_id)
        elif self._snapshot(checkpoint_id, 0.0):
            self.final = checkpoint_id

    def _snapshot(self, checkpoint_id: int, alignment: float) -> bool:
        """The synchronous part of a snapshot: the state copied as plain data, handed to
        the writer, and the barrier sent on (True); or a decline (False). The task
        acknowledges once the writer wrote it (``_written``)."""
        started = time.monotonic()
        self._drain_if_exhausted()
        exhausted = self.source is not None and self.source.exhausted
        try:
            state = {"max_parallelism": self.max_parallelism, "chain": self.chain.snapshot()}
            if self.source is not None:
                state["source"] = self.source.snapshot(checkpoint_id)
            if self.sink is not None:
                state["sink"] = self.sink.snapshot(checkpoint_id)
        except (OSError, ValueError) as error:  # the sink's file, a source's position
            self._decline(checkpoint_id, f"its snapshot could not be taken: {error}")
            return False
        changes = self.store.changes() if self.store is not None else None
        refused = self.writer.submit(checkpoint_id, state, alignment, started, changes)
        if refused:
            if self.store is not None and changes is not None:
                self.store.unchanged(changes)  # they go into the next snapshot's delta
            self._decline(checkpoint_id, refused)
            return False
        if self.output is not None:
            self.output.barrier(checkpoint_id)
        self.last_snapshot = checkpoint_id
        if exhausted and self.final is None:
            self.final = checkpoint_id
        return True

    def _written(self, outcome: SnapshotWritten) -> None:
        """The asynchronous part ended: acknowledge with the state's file, or decline."""
        self.writer.taken()
        deployment = self.deployment
        if outcome.handle is None:
            self.report(p.DeclineCheckpoint(deployment.job_id, deployment.attempt_id,
                                            self.subtask_id, outcome.checkpoint_id,
                                            outcome.error))
            return
        self.report(p.AcknowledgeCheckpoint(deployment.job_id, deployment.attempt_id,
                                            self.subtask_id, outcome.checkpoint_id,
                                            outcome.handle, outcome.alignment,
                                            time.monotonic() - outcome.started))

    def _decline(self, checkpoint_id: int, reason: str) -> None:
        deployment = self.deployment
        if self.output is not None:
            self.output.cancel_marker(checkpoint_id)
        self.report(p.DeclineCheckpoint(deployment.job_id, deployment.attempt_id,
                                        self.subtask_id, checkpoint_id, reason))


def _messages(control: queue.SimpleQueue[Any], wait: float) -> list[Any]:
    """What came, waiting up to ``wait`` seconds for the first one."""
    messages = []
    try:
        messages.append(control.get(timeout=wait) if wait > 0 else control.get_nowait())
        while True:
            messages.append(control.get_nowait())
    except queue.Empty:
        pass
    return messages

