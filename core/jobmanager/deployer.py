"""A job's deployments, after Flink's DefaultExecutionDeployer: the scheduler's
DeployTask turned into a SubmitTask and sent to the TaskExecutor owning the slot.

The deployments of one mailbox turn go to each TaskManager in one SubmitTasks; a batch
too large for a frame goes in halves, and a single deployment too large goes again
without its input partitions (offloaded: the task asks for them page by page, and they
are kept here until the attempt ends). An ask that timed out is sent again, up to
DEPLOY_TRIES times: a TaskExecutor treats a repeated SubmitTask of a running attempt as
done. A deployment that cannot be delivered fails its attempt, and failover decides.

Used on the JobMaster's main thread only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from clusterdeck.core.executiongraph import instructions as ins
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.jobmanager.checkpoints import JobCheckpoints
from clusterdeck.core.jobmanager.datapeers import DataPeers, NoChannelServer
from clusterdeck.core.jobmanager.jobslots import JobSlots
from clusterdeck.core.jobmanager.jobstore import JobRecord
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpointstats import RestoredCheckpointStats
from clusterdeck.core.protocol.gateways import TaskExecutorGateway
from clusterdeck.core.protocol.ids import subtask_id
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.protocol.wiring import EdgeInput, StreamChannel
from clusterdeck.core.rpc import AskTimeoutError, FrameTooLargeError, MainThread
from clusterdeck.core.rpc.outbox import Outbox, send_in_halves

DEPLOY_TRIES = 3
DEPLOYMENTS_PER_MESSAGE = 64  # a SubmitTasks' most tasks; a frame may hold fewer
PARTITION_REF_BYTES = 512  # generous encoded size of one ResultPartitionRef: pages fit


class Deployer:
    def __init__(self, record: JobRecord, work_dir: Path, jobmaster_id: str,
                 fencing_token: str, graph: ExecutionGraph, slots: JobSlots,
                 data_peers: DataPeers, endpoint: MainThread,
                 executor: Callable[[str], TaskExecutorGateway],
                 checkpoints: Callable[[], JobCheckpoints | None],
                 confirmed: Callable[[str], None],
                 failed: Callable[[str, str], None],
                 split_share: Callable[[str], int]) -> None:
        """``executor(taskmanager_id)``: the gateway of its TaskExecutor;
        ``checkpoints()``: a streaming job's checkpoints, once started;
        ``confirmed(attempt_id)``: its TaskExecutor took the deployment;
        ``failed(attempt_id, reason)``: the deployment could not be delivered;
        ``split_share(vertex_id)``: a file source subtask's fair share of its input in
        bytes (jobstart.fair_shares), 0 for any other."""
        self.record = record
        self.job_id = record.job_id
        self.work_dir = work_dir
        self.jobmaster_id = jobmaster_id
        self.fencing_token = fencing_token
        self.graph = graph
        self.slots = slots
        self.data_peers = data_peers
        self._endpoint = endpoint
        self._executor = executor
        self._checkpoints = checkpoints
        self._confirmed = confirmed
        self._failed = failed
        self._split_share = split_share
        self._queued: Outbox[str, p.SubmitTask] = Outbox(DEPLOYMENTS_PER_MESSAGE)
        self._offloaded_inputs: dict[str, tuple[EdgeInput, ...]] = {}
        self.restored: RestoredCheckpointStats | None = None  # last deployed from, when

    def deploy(self, deploy: ins.DeployTask) -> None:
        """Queued: the deployments of this turn go to each TaskManager in one message."""
        slot = deploy.slot
        task = p.SubmitTask(
            job_id=self.job_id, graph=self.record.graph, attempt_id=deploy.attempt_id,
            vertex_id=deploy.vertex_id, subtask=deploy.subtask,
            parallelism=deploy.parallelism, attempt=deploy.attempt,
            slot_index=slot.slot_index, allocation_id=self.slots.allocation_id(slot),
            jobmaster=self.jobmaster_id, fencing_token=self.fencing_token,
            artifact_sha256=self.record.artifact_sha256, work_dir=str(self.work_dir),
            args=self.record.args, inputs=deploy.inputs, outputs=deploy.outputs,
            task_timeout=self.record.task_timeout,
            data_endpoints=self.data_peers.for_inputs(deploy.inputs, slot.taskmanager_id),
            splits=deploy.splits or (), splits_given=deploy.splits is not None,
            split_share=self._split_share(deploy.vertex_id))
        checkpoints = self._checkpoints()
        if checkpoints is not None:
            restore_checkpoint, restore_state = checkpoints.restore_of(
                subtask_id(deploy.vertex_id, deploy.subtask))
            try:
                stream_inputs = self._stream_inputs(deploy)
            except NoChannelServer as error:
                self._endpoint.run_async(self._failed, deploy.attempt_id, str(error))
                return
            task = replace(task, restore_checkpoint=restore_checkpoint,
                           restore_state=restore_state, stream_inputs=stream_inputs)
            if restore_checkpoint:  # for the snapshot: the job resumed from it, now
                self.restored = RestoredCheckpointStats(restore_checkpoint, time.time())
        if self._queued.add(slot.taskmanager_id, task):
            self._endpoint.run_async(self.send)

    def send(self) -> None:
        """What this turn queued; a cancel sends it first, never to overtake it."""
        for taskmanager_id, tasks in self._queued.take():
            self._send_tasks(tasks, taskmanager_id)

    def ended(self, attempt_id: str) -> None:
        """The attempt ended: its offloaded inputs are asked for no more."""
        self._offloaded_inputs.pop(attempt_id, None)

    def input_partitions(self, request: p.RequestInputPartitions,
                         framesize: int) -> p.InputPartitions:
        """One page of an offloaded deployment's input partitions."""
        inputs = self._offloaded_inputs.get(request.attempt_id)
        if inputs is None:
            raise LookupError(f"attempt {request.attempt_id} has no offloaded inputs here")
        edge = next((e for e in inputs if e.input_index == request.input_index), None)
        if edge is None:
            raise LookupError(f"attempt {request.attempt_id} has no input {request.input_index}")
        page = max(1, framesize // PARTITION_REF_BYTES)
        return p.InputPartitions(edge.partitions[request.offset:request.offset + page],
                                 len(edge.partitions))

    def _stream_inputs(self, deploy: ins.DeployTask) -> tuple[StreamChannel, ...]:
        """Where a streaming consumer reads each producer: the producers hold their slots
        already (the scheduler deploys a pipelined job once every subtask has one)."""
        return tuple(
            self.data_peers.stream_channel(producer.taskmanager_id, producer.attempt_id,
                                           subpartition)
            for producer, subpartition in self.graph.stream_producers(deploy.vertex_id,
                                                                      deploy.subtask))

    def _send_tasks(self, tasks: tuple[p.SubmitTask, ...], taskmanager_id: str,
                    tries: int = 0) -> None:
        """The ask encodes first: a batch too large is refused before sending, and goes
        in halves; a single deployment too large goes again without its input partitions,
        and fails its attempt when even that does not fit."""
        gateway = self._executor(taskmanager_id)

        def send(batch: tuple[p.SubmitTask, ...]) -> None:
            sent = gateway.submit_tasks(p.SubmitTasks.of(batch))
            self._endpoint.on_main_thread(sent, lambda answer, error: self._deployed(
                batch, taskmanager_id, tries, answer, error))

        def alone(task: p.SubmitTask, error: FrameTooLargeError) -> None:
            if task.inputs and not task.inputs_offloaded:
                self._send_tasks((self._offloaded(task),), taskmanager_id, tries)
            else:
                self._failed(task.attempt_id, f"the deployment is too large: {error}")

        send_in_halves(tasks, send, alone)

    def _offloaded(self, task: p.SubmitTask) -> p.SubmitTask:
        """The deployment without its input partitions, which the task then asks for page
        by page; kept here until the attempt ends."""
        self._offloaded_inputs[task.attempt_id] = task.inputs
        return replace(task, inputs_offloaded=True, inputs=tuple(
            replace(edge, partitions=()) for edge in task.inputs))

    def _deployed(self, tasks: tuple[p.SubmitTask, ...], taskmanager_id: str, tries: int,
                  answer: Any, error: BaseException | None) -> None:
        results = answer.results if error is None and \
            isinstance(answer, p.TaskOperationResults) else ()
        if error is None and len(results) != len(tasks):
            error = ValueError(f"{len(results)} answers to {len(tasks)} deployments")
        answers = results if error is None else (None,) * len(tasks)
        again = []
        for task, result in zip(tasks, answers, strict=True):
            execution = self.graph.execution(task.attempt_id)
            if result is not None and result.success and result.attempt_id == task.attempt_id:
                if execution is not None and not execution.state.is_terminal:
                    self._confirmed(task.attempt_id)
                continue
            still_deploying = execution is not None and \
                execution.state is ExecutionState.DEPLOYING
            if isinstance(error, AskTimeoutError) and tries < DEPLOY_TRIES and still_deploying:
                # The message or its answer may have been lost (a broker restart): a
                # TaskExecutor treats a repeated SubmitTask of a running attempt as done.
                again.append(task)
                continue
            self._failed(task.attempt_id, str(error) if error
                         else result.message if result else "refused")
        if again:
            self._send_tasks(tuple(again), taskmanager_id, tries + 1)
