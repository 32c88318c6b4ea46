"""The job failing as a whole (a streaming job whose checkpoints keep failing): every
task is cancelled, the job FAILS with that cause, without a restart."""

from __future__ import annotations

from clusterdeck.core.executiongraph import ExecutionState, FixedDelay, TaskFailure
from clusterdeck.core.executiongraph.instructions import CancelAttempt, JobFailed
from clusterdeck.core.protocol.states import JobStatus
from tests.unit.core.executiongraph.helpers import Harness, word_count


def test_failing_the_job_cancels_every_task_and_ends_it_with_the_cause():
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(5, 0.1))
    harness.start()
    harness.grant_slots()
    harness.run_deployed(finish=False)
    running = [harness.attempt("source", i) for i in (0, 1)]
    out = harness.feed(harness.scheduler.fail_job(
        TaskFailure("CheckpointFailure", "3 checkpoints failed in a row"), harness.tick()))
    assert sorted(c.attempt_id for c in out if isinstance(c, CancelAttempt)) == sorted(running)
    assert harness.scheduler.status is JobStatus.FAILING
    assert harness.scheduler.fail_job(TaskFailure("Again", "no"), harness.tick()) == []
    for attempt_id in running:
        harness.report(attempt_id, ExecutionState.CANCELED)
    failed = harness.logged(JobFailed)
    assert len(failed) == 1
    assert failed[0].root_cause.failure.exception_type == "CheckpointFailure"
    assert harness.scheduler.status is JobStatus.FAILED
