"""The JobMaster's side of a streaming job's checkpoints: the TaskManagers' acknowledgements
and declines, the snapshot chunks a restoring attempt asks for, savepoints asked by a
client, and checkpoint messages sent to the attempts. A base of ``JobMaster``
(jobmaster.py), whose state it uses; kept apart so that the JobMaster stays one screenful
of scheduling.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from clusterdeck.core.jobmanager.checkpoints import SavepointFailed, chain, send_to_task
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.rpc import FencedRpcEndpoint, handler

if TYPE_CHECKING:
    from clusterdeck.core.config.settings import Config
    from clusterdeck.core.executiongraph import instructions as ins
    from clusterdeck.core.executiongraph.graph import ExecutionGraph
    from clusterdeck.core.executiongraph.scheduler import Scheduler
    from clusterdeck.core.jobmanager.checkpoints import JobCheckpoints
    from clusterdeck.core.jobmanager.datapeers import DataPeers
    from clusterdeck.core.jobmanager.jobevents import JobSnapshots
    from clusterdeck.core.jobmanager.jobslots import JobSlots
    from clusterdeck.core.protocol.gateways import TaskExecutorGateway


class CheckpointHandlers(FencedRpcEndpoint):
    """What a JobMaster (its subclass) has that these handlers use."""

    config: Config
    job_id: str
    graph: ExecutionGraph
    scheduler: Scheduler | None
    checkpoints: JobCheckpoints | None
    slots: JobSlots
    snapshots: JobSnapshots
    _data_peers: DataPeers
    _ended: bool

    def _running(self) -> bool:
        raise NotImplementedError

    def _execute(self, instructions: list[ins.Instruction]) -> None:
        raise NotImplementedError

    def _executor(self, taskmanager_id: str) -> TaskExecutorGateway:
        raise NotImplementedError

    def _check_attempt_host(self, attempt_id: str, known: bool = False) -> None:
        raise NotImplementedError

    def savepoint(self, request: p.TriggerSavepoint, answer: Future[p.SavepointCompleted]
                  ) -> None:
        """Main thread: take a savepoint or stop; ``answer`` is completed when it is."""
        if self.checkpoints is None or self._ended:
            what = "not a streaming job" if self.checkpoints is None else "over"
            answer.set_exception(SavepointFailed(
                f"job {self.job_id} is {what}: savepoints are of running streaming jobs"))
            return
        chain(self.checkpoints.savepoint(request.stop, request.savepoint), answer)

    # -- checkpoints ---------------------------------------------------------------------------

    def _tell_attempt(self, attempt_id: str, message: Any) -> None:
        self.snapshots.schedule()  # a checkpoint started or ended: observers see it
        execution = self.graph.execution(attempt_id)
        taskmanager_id = execution.taskmanager_id if execution is not None else None
        if not self.slots.knows(taskmanager_id):
            return  # its TaskManager is gone: the attempt is failing over
        send_to_task(self._executor(taskmanager_id), message)

    def _fail_for_checkpoints(self, reason: str) -> None:
        if self._running():
            self._execute(self.scheduler.fail_job(TaskFailure("CheckpointFailure", reason),
                                                  time.time()))

    @handler(p.AcknowledgeCheckpoint, senders=(topics.TASKMANAGERS,))
    def acknowledge_checkpoint(self, ack: p.AcknowledgeCheckpoint) -> None:
        self._check_attempt_host(ack.attempt_id)
        if self.checkpoints is not None and not self._ended:
            execution = self.graph.execution(ack.attempt_id)
            self.checkpoints.acknowledged(ack, self._data_peers.endpoint(
                execution.taskmanager_id if execution is not None else None))
            self.snapshots.schedule()

    @handler(p.RequestStateChunk, senders=(topics.TASKMANAGERS,))
    def request_state_chunk(self, request: p.RequestStateChunk) -> Future[p.JobFileChunk]:
        """A chunk of the snapshot an attempt restores, for its TaskManager when that one
        does not see this machine's checkpoint folder (read on a worker thread)."""
        self._check_attempt_host(request.attempt_id)
        execution = self.graph.execution(request.attempt_id)
        if execution is None or self.checkpoints is None:
            raise ValueError(f"{request.attempt_id} is no attempt of a streaming job "
                             f"{self.job_id}")
        return self.checkpoints.state_chunk(execution.subtask_id, request,
                                            self.config["rpc.framesize"])

    @handler(p.DeclineCheckpoint, senders=(topics.TASKMANAGERS,))
    def decline_checkpoint(self, decline: p.DeclineCheckpoint) -> None:
        self._check_attempt_host(decline.attempt_id)
        if self.checkpoints is not None and not self._ended:
            self.checkpoints.declined(decline)
            self.snapshots.schedule()
