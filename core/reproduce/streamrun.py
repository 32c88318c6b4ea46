"""A streaming subtask run again here: with every other subtask of its job, all restored
from the checkpoint the failed attempt was restored from.

A subtask fed by an exchange has no input of its own to copy: what reached it after the
checkpoint was never stored. Its upstream sources are replayable, though (a rate
generator, a watched folder), and restored at the same checkpoint they replay exactly
what the exchange carried, as after a failover on the cluster. So every subtask runs
through ``run_stream_subtask`` on a thread of its own, wired by one local channel
server as the JobMaster wires them across TaskManagers; no checkpoint is triggered. The
run ends when the reproduced subtask fails (its failure is raised here, the others
cancelled), when every subtask ended, or after ``timeout`` seconds.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.dataservice.capability import new_key
from clusterdeck.core.engine.cancellation import cancel_subtask
from clusterdeck.core.engine.streamtask import run_stream_subtask
from clusterdeck.core.jobapi.errors import SubtaskCancelled, SubtaskFailed
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.ids import subtask_id
from clusterdeck.core.protocol.wiring import StreamChannel, consumed_partitions
from clusterdeck.core.reproduce.folder import OUTPUT, STATE, Reproduction, ReproductionError
from clusterdeck.core.streaming.network import ChannelServer, partition_capability

STOP_GRACE = 30.0  # seconds the other subtasks get to stop once cancelled


class _Subtask:
    """One subtask's thread and how it ended (set by that thread, read after join)."""

    def __init__(self, deployment: p.SubmitTask) -> None:
        self.deployment = deployment
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None


def run_streaming(spark: Any, job: LoadedJob, folder: Path, reproduction: Reproduction,
                  timeout: float) -> None:
    """Raises the reproduced subtask's SubtaskFailed, or returns once every subtask
    ended without it failing; ReproductionError after ``timeout`` seconds."""
    channels = ChannelServer(new_key())
    address = channels.start()
    storage = CheckpointStorage(folder / STATE)
    run_id = uuid.uuid4().hex[:6]
    graph = job.graph
    attempts = {subtask_id(v.id, i): f"{reproduction.job_id}/{subtask_id(v.id, i)}/local-"
                f"{run_id}" for v in graph.vertices for i in range(v.parallelism)}
    ended = threading.Event()
    subtasks: dict[str, _Subtask] = {}
    for vertex in graph.vertices:
        for index in range(vertex.parallelism):
            inputs = tuple(
                StreamChannel(address.host, address.port, "", producer_attempt, partition,
                              partition_capability(channels.key, producer_attempt))
                for edge in graph.inputs_of(vertex.id)
                for producer, partition in consumed_partitions(
                    edge.ship_strategy, index, graph.vertex(edge.source).parallelism)
                for producer_attempt in (attempts[subtask_id(edge.source, producer)],))
            name = subtask_id(vertex.id, index)
            subtasks[name] = _Subtask(p.SubmitTask(
                job_id=reproduction.job_id, graph=graph, attempt_id=attempts[name],
                vertex_id=vertex.id, subtask=index, parallelism=vertex.parallelism,
                attempt=reproduction.attempt, slot_index=0, allocation_id="",
                jobmaster="", fencing_token="", artifact_sha256=reproduction.artifact_sha256,
                work_dir=str(folder / OUTPUT), args=reproduction.args,
                restore_checkpoint=reproduction.checkpoint_id,
                restore_state=reproduction.states.get(name), stream_inputs=inputs))
    target = subtasks[subtask_id(reproduction.vertex_id, reproduction.subtask)]
    try:
        for subtask in subtasks.values():
            subtask.thread = threading.Thread(
                target=_run, args=(spark, job, subtask, storage, channels, folder, ended),
                name=f"reproduce:{subtask.deployment.vertex_id}#{subtask.deployment.subtask}",
                daemon=True)
            subtask.thread.start()
        deadline = time.monotonic() + timeout
        while target.thread is not None and target.thread.is_alive():
            ended.wait(min(0.5, max(0.0, deadline - time.monotonic())))
            ended.clear()
            if time.monotonic() >= deadline:
                raise ReproductionError(f"the subtask neither failed nor ended within "
                                        f"{timeout:g} s (--timeout)")
    finally:
        for subtask in subtasks.values():
            cancel_subtask(spark, subtask.deployment.attempt_id)
        for subtask in subtasks.values():
            if subtask.thread is not None:
                subtask.thread.join(STOP_GRACE)
        channels.close()
    if isinstance(target.error, SubtaskFailed):
        raise target.error
    if target.error is not None and not isinstance(target.error, SubtaskCancelled):
        raise target.error


def _run(spark: Any, job: LoadedJob, subtask: _Subtask, storage: CheckpointStorage,
         channels: ChannelServer, folder: Path, ended: threading.Event) -> None:
    """A subtask's own thread: as a TaskManager's slot thread runs a streaming task,
    never told of a checkpoint."""
    deployment = subtask.deployment
    control: queue.SimpleQueue[Any] = queue.SimpleQueue()
    try:
        run_stream_subtask(spark, job, deployment, control, _no_reports, storage,
                           printed=folder / OUTPUT / f"{deployment.vertex_id}-"
                                                     f"{deployment.subtask}.stdout",
                           channels=channels)
    except BaseException as error:  # handed to the waiting thread, which raises it
        subtask.error = error
    finally:
        ended.set()


def _no_reports(_message: Any) -> None:
    """No checkpoint is triggered here, so no acknowledgement is ever reported."""
