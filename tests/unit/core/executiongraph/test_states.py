"""Execution and job states: which are terminal and which moves are legal."""

import pytest

from clusterdeck.core.executiongraph import Execution, ExecutionState, IllegalTransition, JobStatus

S = ExecutionState


def test_finished_canceled_and_failed_are_the_terminal_execution_states():
    assert {state for state in S if state.is_terminal} == {S.FINISHED, S.CANCELED, S.FAILED}


def test_a_terminal_execution_state_allows_no_further_move():
    for terminal in (S.FINISHED, S.CANCELED, S.FAILED):
        assert not any(terminal.can_become(state) for state in S)


def test_an_execution_moves_forward_through_scheduling_deploying_and_running():
    assert S.CREATED.can_become(S.SCHEDULED)
    assert S.SCHEDULED.can_become(S.DEPLOYING)
    assert S.DEPLOYING.can_become(S.RUNNING)
    assert S.RUNNING.can_become(S.FINISHED)


def test_an_execution_never_moves_backwards():
    assert not S.RUNNING.can_become(S.SCHEDULED)
    assert not S.DEPLOYING.can_become(S.CREATED)
    assert not S.SCHEDULED.can_become(S.RUNNING)


def test_a_short_task_may_finish_before_its_running_report_arrives():
    assert S.DEPLOYING.can_become(S.FINISHED)


def test_a_canceling_execution_can_only_become_canceled():
    assert {state for state in S if S.CANCELING.can_become(state)} == {S.CANCELED}


def test_finished_failed_and_canceled_are_the_terminal_job_statuses():
    assert {status for status in JobStatus if status.is_terminal} == {
        JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED}


def test_a_running_job_may_finish_fail_be_cancelled_or_restart():
    assert {status for status in JobStatus if JobStatus.RUNNING.can_become(status)} == {
        JobStatus.FINISHED, JobStatus.FAILING, JobStatus.CANCELLING, JobStatus.RESTARTING}


def test_a_failing_job_ends_failed_and_a_cancelling_job_ends_canceled():
    assert JobStatus.FAILING.can_become(JobStatus.FAILED)
    assert {s for s in JobStatus if JobStatus.CANCELLING.can_become(s)} == {JobStatus.CANCELED}


def test_a_transition_stamps_the_time_and_returns_the_old_state():
    execution = Execution("job", "source", 0, attempt=0)

    assert execution.transition(S.SCHEDULED, now=5.0) is S.CREATED
    assert execution.state is S.SCHEDULED
    assert execution.state_timestamps[S.SCHEDULED] == 5.0


def test_an_illegal_transition_raises_and_leaves_the_execution_unchanged():
    execution = Execution("job", "source", 0, attempt=0)

    with pytest.raises(IllegalTransition):
        execution.transition(S.RUNNING, now=1.0)
    assert execution.state is S.CREATED
