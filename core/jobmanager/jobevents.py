"""What observers of one job hear on ``events/jobs/<job-id>``, batched per mailbox turn.

A job of thousands of subtasks moves thousands of executions a second; one message per
move would cost the JobMaster (and every observer) more than the moves themselves. The
moves of one turn of the JobMaster's mailbox go out as one ExecutionStateEvents, in
order; a job status change goes out at once, after the moves queued before it, so no
observer sees a job FINISHED before its last subtask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc.outbox import Outbox, send_in_halves

EVENTS_PER_MESSAGE = 128


class JobEvents:
    def __init__(self, job_id: str, publish: Callable[[str, Any], None],
                 post: Callable[[Callable[[], None]], None]) -> None:
        """``publish(topic, message)`` sends; ``post(fn)`` runs ``fn`` on the endpoint's
        main thread after what its mailbox holds now (``run_async``)."""
        self.job_id = job_id
        self.topic = topics.job_events(job_id)
        self._publish = publish
        self._post = post
        self._moves: Outbox[str, p.ExecutionStateEvent] = Outbox(EVENTS_PER_MESSAGE)

    def execution_moved(self, event: p.ExecutionStateEvent) -> None:
        if self._moves.add(self.job_id, event):
            self._post(self.flush)

    def status_changed(self, old: JobStatus, new: JobStatus, at: float) -> None:
        self.flush()
        self._publish(self.topic, p.JobStatusEvent(self.job_id, old, new, at))

    def flush(self) -> None:
        for _, events in self._moves.take():
            # one move, even with its failure record, is bounded far below a frame
            send_in_halves(events, self._send)

    def _send(self, events: tuple[p.ExecutionStateEvent, ...]) -> None:
        self._publish(self.topic, p.ExecutionStateEvents(self.job_id, events))
