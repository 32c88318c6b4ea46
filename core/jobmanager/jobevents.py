"""What observers of one job hear on ``events/jobs/<job-id>``, batched per mailbox turn.

A job of thousands of subtasks moves thousands of executions a second; one message per
move would cost the JobMaster (and every observer) more than the moves themselves. The
moves of one turn of the JobMaster's mailbox go out as one ExecutionStateEvents, in
order; a job status change goes out at once, after the moves queued before it, so no
observer sees a job FINISHED before its last subtask.

The job's whole state goes out besides, retained on ``state/jobs/<job-id>`` as a
JobSnapshot (``JobSnapshots``, Flink's ExecutionGraphInfo), at most so often; and its
progress to the Dispatcher's job list (``ProgressReports``). All of it runs on the
JobMaster's main thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterdeck.core.executiongraph import instructions as ins
from clusterdeck.core.executiongraph.execution import SlotRef
from clusterdeck.core.jobmanager.reductions import reductions
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.protocol.workdir import OUTPUT
from clusterdeck.core.rpc import FrameTooLargeError, MainThread
from clusterdeck.core.rpc.outbox import Outbox, send_in_halves

log = logging.getLogger(__name__)
EVENTS_PER_MESSAGE = 128
SNAPSHOT_INTERVAL = 0.1  # at most ten snapshots a second, however busy the job
SUBTASKS_PER_SNAPSHOT_SECOND = 2000  # a 1,000-subtask job: two snapshots a second
PROGRESS_INTERVAL = 0.25  # seconds between two progress reports to the Dispatcher


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


def execution_event(job_id: str, change: ins.ExecutionStateChanged,
                    slot: SlotRef | None) -> p.ExecutionStateEvent:
    """The scheduler's move of an attempt, for observers, with the slot it holds."""
    return p.ExecutionStateEvent(
        job_id, change.attempt_id, change.vertex_id, change.subtask, change.attempt,
        change.old, change.new, change.timestamp, slot.taskmanager_id if slot else None,
        slot.slot_index if slot else None, change.failure)


def relayed_output(job_id: str, output: p.TaskOutput, work_dir: Path) -> p.JobOutput:
    """What a running script printed, for its submitter on ``jobs/<job-id>/output``;
    ValueError unless it is a piece of one of the job's output files."""
    if output.stream not in ("stdout", "stderr") or output.offset < 0 or \
            len(output.text) > p.OUTPUT_PIECE or \
            os.path.dirname(output.path) != str(work_dir / OUTPUT) or \
            not output.path.endswith(f".{output.stream}"):
        raise ValueError(f"malformed output of {output.attempt_id}")
    return p.JobOutput(job_id, output.attempt_id, output.stream, output.path, output.offset,
                       output.text)


class JobSnapshots:
    def __init__(self, job_id: str, subtasks: int, endpoint: MainThread,
                 build: Callable[[], JobGraphSnapshot],
                 publish: Callable[[str, Any], None]) -> None:
        """``build()``: the job's snapshot now; ``publish(topic, message)`` sends it,
        retained, and raises FrameTooLargeError for one too large."""
        self.job_id = job_id
        self.subtasks = subtasks
        self._endpoint = endpoint
        self._build = build
        self._publish = publish
        self._due = False
        self._level = 0  # the first of reductions() that fitted

    def schedule(self) -> None:
        """Something changed: a snapshot goes out soon, one for every change meanwhile."""
        if not self._due:
            self._due = True
            # A large job's snapshot costs more to build, send and redraw; its events carry
            # every change meanwhile.
            self._endpoint.schedule(
                max(SNAPSHOT_INTERVAL, self.subtasks / SUBTASKS_PER_SNAPSHOT_SECOND),
                self.publish)

    def publish(self) -> None:
        self._due = False
        snapshot = self._build()
        # A job's snapshot only grows: start from the reduction that fitted last time
        # rather than encode a megabyte that is bound to be refused again.
        for level, candidate in reductions(snapshot, self._level):
            try:  # publish encodes first: a snapshot too large is refused before sending
                self._publish(topics.job_state(self.job_id), p.JobSnapshot(self.job_id,
                                                                           candidate))
                self._level = level
                return
            except FrameTooLargeError:
                continue
        log.warning("job %s: even its smallest snapshot exceeds rpc.framesize", self.job_id)


class ProgressReports:
    """The Dispatcher's job list shows progress, reported at most every
    PROGRESS_INTERVAL: counting it is linear in the job's subtasks, and the list is
    published whole, so a job finishing hundreds of subtasks a second would do both for
    each. Status changes are reported at once, by the JobMaster."""

    def __init__(self, endpoint: MainThread, report: Callable[[], None]) -> None:
        self._endpoint = endpoint
        self._report = report
        self._due = False

    def soon(self) -> None:
        if not self._due:
            self._due = True
            self._endpoint.schedule(PROGRESS_INTERVAL, self._report_now)

    def _report_now(self) -> None:
        self._due = False
        self._report()
