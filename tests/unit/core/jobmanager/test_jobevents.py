"""Execution events go out once per mailbox turn, in order, never after the job's end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clusterdeck.core.jobmanager.jobevents import EVENTS_PER_MESSAGE, JobEvents
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import ExecutionState as S
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import FrameTooLargeError


class Endpoint:
    """Plays the JobMaster's mailbox: posted calls run when the test says so."""

    def __init__(self, most_per_message: int | None = None) -> None:
        self.sent: list[Any] = []
        self.mailbox: list[Callable[[], None]] = []
        self.most = most_per_message

    def publish(self, _topic: str, message: Any) -> None:
        if self.most and len(getattr(message, "events", ())) > self.most:
            raise FrameTooLargeError("too large")
        self.sent.append(message)

    def turn(self) -> None:
        mailbox, self.mailbox = self.mailbox, []
        for call in mailbox:
            call()


def move(n: int, new: S = S.RUNNING) -> p.ExecutionStateEvent:
    return p.ExecutionStateEvent("job", f"job/v#{n}/a0", "v", n, 0, S.DEPLOYING, new, 1.0)


def test_the_moves_of_one_turn_go_in_one_message_in_order() -> None:
    endpoint = Endpoint()
    events = JobEvents("job", endpoint.publish, endpoint.mailbox.append)
    for n in range(5):
        events.execution_moved(move(n))
    assert endpoint.sent == [] and len(endpoint.mailbox) == 1  # one flush posted
    endpoint.turn()
    assert [type(m).__name__ for m in endpoint.sent] == ["ExecutionStateEvents"]
    assert [e.subtask for e in p.job_events_in(endpoint.sent[0])] == [0, 1, 2, 3, 4]


def test_a_message_holds_at_most_its_limit() -> None:
    endpoint = Endpoint()
    events = JobEvents("job", endpoint.publish, endpoint.mailbox.append)
    for n in range(EVENTS_PER_MESSAGE + 1):
        events.execution_moved(move(n))
    endpoint.turn()
    assert [len(m.events) for m in endpoint.sent] == [EVENTS_PER_MESSAGE, 1]


def test_a_status_change_goes_after_the_moves_queued_before_it() -> None:
    endpoint = Endpoint()
    events = JobEvents("job", endpoint.publish, endpoint.mailbox.append)
    events.execution_moved(move(0, S.FINISHED))
    events.status_changed(JobStatus.RUNNING, JobStatus.FINISHED, 2.0)
    endpoint.turn()  # the posted flush finds nothing left
    flat = [e for m in endpoint.sent for e in p.job_events_in(m)]
    assert [type(e).__name__ for e in flat] == ["ExecutionStateEvent", "JobStatusEvent"]


def test_a_batch_too_large_for_a_frame_goes_in_halves() -> None:
    endpoint = Endpoint(most_per_message=3)
    events = JobEvents("job", endpoint.publish, endpoint.mailbox.append)
    for n in range(10):
        events.execution_moved(move(n))
    endpoint.turn()
    assert all(len(m.events) <= 3 for m in endpoint.sent)
    assert [e.subtask for m in endpoint.sent for e in m.events] == list(range(10))
