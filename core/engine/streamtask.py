"""One streaming subtask: a task that runs until its source ends (or for ever), reading
its replayable source in small batches, running each batch's records through its
operators on Spark and into its sink, and taking part in checkpoints (docs/streaming.md).

Its chain is ``rate_source|folder_source -> map/flat_map/filter -> write_text|print``;
the source and the sink are behind the protocols of ``streamparts``. Between two batches
nothing is in flight inside the chain (the operators run within a batch), so the trigger
of checkpoint *n* is the task's barrier: its snapshot is the source's position and the
sink's state (the file sink's pending files), consistent with each other, written to the
checkpoint storage and acknowledged. When the JobMaster says *n* completed, the sink
commits. Restored from a checkpoint, the source goes on from its position and the file
sink keeps exactly that checkpoint's output (the print sink prints again what came after
it: at least once).

A source with a count ends: the task then waits for one more checkpoint (its final one,
taken after its last record), and once that completed (its output committed) it
finishes. Runs on the slot thread; checkpoint messages come from the TaskExecutor's main
thread through ``control``, acknowledgements go back through ``report``.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterdeck.core.checkpointing import CheckpointStorage, CheckpointStorageError
from clusterdeck.core.engine.cancellation import attempt_scope
from clusterdeck.core.engine.liveoutput import LiveOutput
from clusterdeck.core.engine.records import text_line
from clusterdeck.core.engine.runtime import SubtaskResult, failure_of
from clusterdeck.core.engine.streamparts import (
    SINKS,
    SOURCES,
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

BATCH_RECORDS = 2000  # records through Spark at most per batch (one Spark job)
IDLE_WAIT = 0.1       # seconds a task with nothing due waits for a message at most

Report = Callable[[Any], None]


def run_stream_subtask(spark: Any, job: LoadedJob, deployment: p.SubmitTask,
                       control: queue.SimpleQueue[Any], report: Report, storage_root: Path,
                       counts: LiveCounts | None = None, *, live: LiveOutput | None = None,
                       printed: Path | None = None) -> SubtaskResult:
    """Run the subtask until its final checkpoint completed; raises SubtaskCancelled
    once cancelled, SubtaskFailed when its user code or its files fail. ``printed``: the
    attempt's output file, where a print sink writes (and to ``live`` as it does)."""
    started = time.monotonic()
    feed = (lambda text: live.write("stdout", text)) if live is not None else None
    task = _StreamTask(spark, job, deployment, report, CheckpointStorage(storage_root),
                       counts or LiveCounts(),
                       Printed(printed, feed) if printed is not None else None)
    vertex = job.graph.vertex(deployment.vertex_id)
    description = f"{job.graph.name}: {vertex.name} ({deployment.subtask + 1}/" \
                  f"{vertex.parallelism})"
    with attempt_scope(spark.sparkContext, deployment.attempt_id, description) as (
            cancelled, _group):
        try:
            task.restore()
            while not task.done:
                if cancelled():
                    raise SubtaskCancelled(deployment.attempt_id)
                task.step(control)
        except (SubtaskCancelled, SubtaskFailed):
            task.sink.close()
            raise
        except Exception as error:
            task.sink.close()
            raise failure_of(error, deployment.vertex_id, deployment.subtask,
                             deployment.attempt_id) from error
    output = task.sink.output()
    return SubtaskResult(deployment.vertex_id, deployment.subtask, deployment.attempt_id,
                         task.counts.records_in, task.counts.records_out,
                         sink_files={task.sink_op.id: list(output.files)},
                         stdout=output.stdout_tail, stdout_file=output.stdout_file,
                         duration=time.monotonic() - started)


class _StreamTask:
    """The state of one streaming attempt (slot thread only)."""

    def __init__(self, spark: Any, job: LoadedJob, deployment: p.SubmitTask, report: Report,
                 storage: CheckpointStorage, counts: LiveCounts,
                 printed: Printed | None = None) -> None:
        self.spark = spark
        self.deployment = deployment
        self.report = report
        self.storage = storage
        self.counts = counts
        vertex = job.graph.vertex(deployment.vertex_id)
        source_op, *operators, self.sink_op = vertex.operators
        if source_op.kind not in SOURCES or self.sink_op.kind not in SINKS:
            raise ValueError(f"{vertex.name} is not a streaming chain this runtime runs")
        self.functions = [(op.kind, job.code[op.id].fn) for op in operators]
        self.subtask_id = f"{deployment.vertex_id}#{deployment.subtask}"
        self.attempt = deployment.attempt_id.rsplit("/", 1)[-1]  # a3, or e1a3 after failover
        # Fresh and untouched until ``restore`` (no file is read or written before it)
        self.source: StreamSource = open_source(source_op, deployment.subtask,
                                                deployment.parallelism)
        self.sink: StreamSink = open_sink(self.sink_op, deployment.subtask,
                                          deployment.parallelism, self.attempt, printed)
        self.final: int | None = None  # the checkpoint taken after the last record
        self.stopping: int | None = None  # a stop's checkpoint: no record after its barrier
        self.done = False

    def restore(self) -> None:
        """From the deployment's checkpoint (its state read and checked), or afresh: the
        file sink drops whatever an earlier attempt left uncommitted either way. The sink
        first: it commits what the checkpoint holds even when the source then fails."""
        deployment = self.deployment
        data: dict[str, Any] = {"source": None, "sink": None}
        if deployment.restore_state is not None:
            data = json.loads(self.storage.read_state(deployment.job_id,
                                                      deployment.restore_state))
        self.sink.restore(data["sink"])
        self.source.restore(data["source"])

    def step(self, control: queue.SimpleQueue[Any]) -> None:
        """Handle the messages that came, then run one batch or wait a little."""
        wait = 0.0
        if self.source.exhausted or self.stopping is not None:
            wait = IDLE_WAIT
        else:
            now = time.time()
            batch = self.source.poll(now, BATCH_RECORDS)
            if batch:
                self._through(batch)
            else:
                wait = min(IDLE_WAIT, self.source.seconds_to_next(now))
        waited = time.monotonic()
        for message in _messages(control, wait):
            self._handle(message)
        if wait > 0:  # the task's busy share: it had nothing to do meanwhile
            self.counts.idle += time.monotonic() - waited

    def _through(self, records: list[Any]) -> None:
        rdd = self.spark.sparkContext.parallelize(records, 1)
        for kind, function in self.functions:
            rdd = rdd.map(function) if kind == plan.MAP else rdd.flatMap(function) \
                if kind == plan.FLAT_MAP else rdd.filter(function)
        out = rdd.collect() if self.functions else records
        self.sink.write(text_line(record) for record in out)
        self.counts.records_in += len(records)
        self.counts.records_out += len(out)

    def _handle(self, message: Any) -> None:
        if isinstance(message, p.TriggerCheckpoint):
            if self._snapshot(message.checkpoint_id) and message.stop:
                self.stopping = message.checkpoint_id
        elif isinstance(message, p.NotifyCheckpointComplete):
            self.sink.committed(message.checkpoint_id)
            if any(last is not None and message.checkpoint_id >= last
                   for last in (self.final, self.stopping)):
                self.done = True
        elif isinstance(message, p.NotifyCheckpointAborted) \
                and self.stopping == message.checkpoint_id:  # the stop failed: go on
            self.stopping = None

    def _snapshot(self, checkpoint_id: int) -> bool:
        """Snapshot and acknowledge (True), or decline (False)."""
        started = time.monotonic()
        deployment = self.deployment
        exhausted = self.source.exhausted
        try:
            sink_state = self.sink.snapshot(checkpoint_id)
            state = json.dumps({"source": self.source.snapshot(),
                                "sink": sink_state}).encode()
            handle = self.storage.write_state(deployment.job_id, checkpoint_id,
                                              self.subtask_id, state)
        except (OSError, CheckpointStorageError) as error:
            self.report(p.DeclineCheckpoint(deployment.job_id, deployment.attempt_id,
                                            self.subtask_id, checkpoint_id,
                                            f"its snapshot could not be written: {error}"))
            return False
        if exhausted and self.final is None:
            self.final = checkpoint_id
        self.report(p.AcknowledgeCheckpoint(deployment.job_id, deployment.attempt_id,
                                            self.subtask_id, checkpoint_id, handle, 0.0,
                                            time.monotonic() - started))
        return True


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
