"""The JobMaster's chain of causes in its job's snapshot: a streaming job whose only
TaskManager is lost while a checkpoint is in progress."""

from __future__ import annotations

import time

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.causes import CauseKind, check_cause_chain
from clusterdeck.core.protocol.failures import TASKMANAGER_LOST
from clusterdeck.core.protocol.gateways import JobMasterGateway
from clusterdeck.core.protocol.ids import subtask_id
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from tests.unit.core.jobmanager.test_jobmaster import (  # noqa: F401 (the fixture)
    TM,
    TOKEN,
    CheckpointingTaskExecutor,
    rate_to_files,
    service,
    start_job,
)
from tests.waiting import wait_for


def test_a_lost_taskmanager_is_the_root_of_the_failure_restart_abort_and_restore(
        service, tmp_path) -> None:  # noqa: F811
    snapshots: list[JobGraphSnapshot] = []
    service.subscribe(topics.job_state("job-1"),
                      lambda _topic, message: snapshots.append(message.graph))
    taskexecutor = CheckpointingTaskExecutor()
    jobmaster, _ = start_job(service, tmp_path, taskexecutor, rate_to_files(tmp_path / "out"),
                             **{"restart-strategy.type": "fixed-delay",
                                "restart-strategy.fixed-delay.attempts": 1,
                                "restart-strategy.fixed-delay.delay": 0.0})
    gateway = service.gateway(JobMasterGateway, jobmaster.endpoint_id, TOKEN)
    (task,) = taskexecutor.deployments
    first = wait_for(lambda: taskexecutor.triggers and taskexecutor.triggers[0], 10,
                     "checkpoint 1's trigger")
    gateway.acknowledge_checkpoint(p.AcknowledgeCheckpoint(
        "job-1", first.attempt_id, subtask_id(task.vertex_id, task.subtask), 1))
    wait_for(lambda: len(taskexecutor.triggers) >= 2, 10, "checkpoint 2 in progress")

    lost_at = time.time()
    jobmaster.run_async(jobmaster._taskmanager_lost, TM, "process exited (detected by "
                        "last will)", lost_at)

    wait_for(lambda: len(taskexecutor.deployments) == 2, 10, "the attempt deployed again")
    graph = wait_for(lambda: next((s for s in reversed(snapshots) if s.causes and any(
        e.kind is CauseKind.RESTORED for e in s.causes.events)), None), 10,
        "a snapshot with the restore in its chain")
    chain = graph.causes
    check_cause_chain(chain)
    (root,) = chain.roots()
    assert (root.kind, root.taskmanager_id, root.carried_by.type, root.carried_by.at) == (
        CauseKind.TASKMANAGER_LOST, TM, "TaskManagerLost", lost_at)
    (failed,) = chain.children(root.id)
    assert (failed.kind, failed.attempt_id) == (CauseKind.ATTEMPT_FAILED, first.attempt_id)
    (restart,) = chain.children(failed.id)
    assert restart.kind is CauseKind.REGION_RESTARTED
    aborted, restored = chain.children(restart.id)
    assert (aborted.kind, aborted.checkpoint_id) == (CauseKind.CHECKPOINT_ABORTED, 2)
    assert aborted.carried_by.type == "NotifyCheckpointAborted"
    assert (restored.kind, restored.checkpoint_id) == (CauseKind.RESTORED, 1)
    assert restored.carried_by.type == "SubmitTasks"
    assert graph.root_cause.exception_type == TASKMANAGER_LOST
