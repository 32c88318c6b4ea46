"""The JobMaster's part in reactive mode (core/jobmanager/reactive.py): suspended to
rescale, it stops every task without ending the job, and its next run's chain of causes
begins with the rescales."""

from __future__ import annotations

import time

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.causes import CauseKind
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import JobStatus
from tests.unit.core.jobmanager.test_jobmaster import (  # noqa: F401 (the fixture)
    CheckpointingTaskExecutor,
    rate_to_files,
    service,
    start_job,
)
from tests.waiting import wait_for


def test_a_suspended_job_stops_its_tasks_without_ending_or_telling_a_cancel(
        service, tmp_path) -> None:  # noqa: F811
    statuses: list[JobStatus] = []
    service.subscribe(topics.job_events("job-1"), lambda _topic, event: statuses.append(
        event.new) if isinstance(event, p.JobStatusEvent) else None)
    taskexecutor = CheckpointingTaskExecutor()
    jobmaster, outcome = start_job(service, tmp_path, taskexecutor,
                                   rate_to_files(tmp_path / "out"))
    (task,) = taskexecutor.deployments
    suspended: list[float] = []
    taskexecutor.running.clear()  # its cancel is confirmed at once
    jobmaster.run_async(jobmaster.suspend, lambda: suspended.append(time.time()))
    wait_for(lambda: suspended, 10, "the job suspended")
    assert taskexecutor.cancelled == [task.attempt_id]
    triggers = len(taskexecutor.triggers)
    time.sleep(0.2)  # four checkpoint intervals: none is triggered once suspended
    assert len(taskexecutor.triggers) == triggers
    assert outcome.result is None
    assert JobStatus.CANCELLING not in statuses and JobStatus.CANCELED not in statuses
    jobmaster.run_async(jobmaster.suspend, lambda: suspended.append(0.0))  # once only
    assert jobmaster.call_async(lambda: len(suspended)).result(5) == 1


def test_the_rescales_begin_the_chain_of_causes_of_the_next_run(
        service, tmp_path) -> None:  # noqa: F811
    snapshots: list[JobGraphSnapshot] = []
    service.subscribe(topics.job_state("job-1"),
                      lambda _topic, message: snapshots.append(message.graph))
    jobmaster, _ = start_job(service, tmp_path, CheckpointingTaskExecutor(),
                             rate_to_files(tmp_path / "out"))
    jobmaster.run_async(jobmaster.rescaled, (
        ("rescaled from 1 to 2: taskmanager-2 registered", 7, 100.0),
        ("rescaled from 2 to 1: taskmanager-2 lost", 0, 200.0)))
    chain = wait_for(lambda: next((s.causes for s in reversed(snapshots) if s.causes), None),
                     10, "a snapshot with the rescales")
    assert [(e.kind, e.summary, e.checkpoint_id, e.cause_id) for e in chain.events] == [
        (CauseKind.JOB_RESCALED, "rescaled from 1 to 2: taskmanager-2 registered (from "
         "checkpoint 7)", 7, None),
        (CauseKind.JOB_RESCALED, "rescaled from 2 to 1: taskmanager-2 lost (no checkpoint "
         "yet: from the start)", 0, None)]
