"""The state updates to the JobMasters (core/taskmanager/updates.py): gathered, sent
until acknowledged, given up after MAX_TRIES, dropped once their JobMaster is fenced."""

from __future__ import annotations

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.rpc import AskTimeoutError, FencingTokenMismatchError, RemoteError
from clusterdeck.core.taskmanager.updates import (
    MAX_RETRY_DELAY,
    MAX_TRIES,
    UPDATE_LINGER,
    StateUpdates,
    is_fenced,
    retry_delay,
)
from tests.unit.core.taskmanager.helpers import FakeEndpoint, deployment


def finished(task: p.SubmitTask) -> p.UpdateTaskExecutionState:
    return p.UpdateTaskExecutionState(task.job_id, task.attempt_id, ExecutionState.FINISHED)


def sent_once(endpoint: FakeEndpoint) -> tuple[p.UpdateTaskExecutionStates, object]:
    """The one ask sent since the last call, and its answer to complete."""
    (name, message, answer), = endpoint.rpc_service.calls()
    assert name == "update_task_execution_states"
    endpoint.rpc_service.gateways.clear()
    return message, answer


def test_the_retry_delay_doubles_from_a_tenth_of_a_second_up_to_two_seconds() -> None:
    delays = [retry_delay(tries) for tries in range(MAX_TRIES)]
    assert delays[:6] == [0.1, 0.2, 0.4, 0.8, 1.6, MAX_RETRY_DELAY]
    assert max(delays) == MAX_RETRY_DELAY
    assert 30 < sum(delays) < 40  # about half a minute: a broker restart, a failover


def test_the_updates_of_one_turn_go_to_their_jobmaster_in_one_message() -> None:
    endpoint = FakeEndpoint()
    updates = StateUpdates(endpoint)
    first, second = deployment("job/v#0/a0"), deployment("job/v#1/a0", slot_index=1)
    updates.report(first, finished(first))
    updates.report(second, finished(second))
    endpoint.drain()

    message, answer = sent_once(endpoint)
    assert [u.attempt_id for u in message.updates] == ["job/v#0/a0", "job/v#1/a0"]
    assert updates.reporting("job") == ("job/v#0/a0", "job/v#1/a0")
    answer.set_result(p.UpdatesAcknowledged((p.UpdateAcknowledged("job/v#0/a0", True),
                                             p.UpdateAcknowledged("job/v#1/a0", True))))
    endpoint.drain()
    assert updates.reporting("job") == ()
    assert endpoint.timers == []


def test_an_unanswered_update_is_sent_again_until_it_is_given_up_after_max_tries() -> None:
    endpoint = FakeEndpoint()
    updates = StateUpdates(endpoint)
    task = deployment()
    updates.report(task, finished(task))
    endpoint.drain()
    delays = []
    for _ in range(MAX_TRIES + 1):
        _message, answer = sent_once(endpoint)
        answer.set_exception(AskTimeoutError("no answer"))
        endpoint.drain()
        assert updates.reporting("job") == ("job/v#0/a0",) or not endpoint.timers
        while endpoint.timers and not endpoint.rpc_service.calls():  # retry, then linger
            delays += [d for d in endpoint.fire_timers() if d > UPDATE_LINGER]

    assert delays == [retry_delay(tries) for tries in range(MAX_TRIES)]
    assert endpoint.rpc_service.calls() == []  # given up: sent no more
    assert updates.reporting("job") == ()  # reconciliation now finds the attempt lost


def test_an_update_to_a_fenced_jobmaster_is_dropped_without_retries() -> None:
    endpoint = FakeEndpoint()
    updates = StateUpdates(endpoint)
    task = deployment()
    updates.report(task, finished(task))
    endpoint.drain()
    _message, answer = sent_once(endpoint)

    answer.set_exception(RemoteError(FencingTokenMismatchError.__name__, "stale token"))
    endpoint.drain()

    assert endpoint.timers == []
    assert updates.reporting("job") == ()


def test_only_a_remote_fencing_error_counts_as_fenced() -> None:
    assert is_fenced(RemoteError("FencingTokenMismatchError", "stale"))
    assert not is_fenced(RemoteError("ValueError", "bad"))
    assert not is_fenced(FencingTokenMismatchError("raised here, not by the JobMaster"))
    assert not is_fenced(None)


def test_the_ended_attempts_numbers_go_before_the_updates() -> None:
    endpoint = FakeEndpoint()
    order: list[str] = []
    updates = StateUpdates(endpoint, lambda: order.append("numbers"))
    task = deployment()
    updates.report(task, finished(task))
    endpoint.drain()
    assert order == ["numbers"] and len(endpoint.rpc_service.calls()) == 1
