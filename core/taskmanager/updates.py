"""The TaskExecutor's state updates to its JobMasters: gathered, sent until acknowledged.

A task's RUNNING and its final state go to the JobMaster that deployed it in
``UpdateTaskExecutionStates`` messages, those of one turn (of ``UPDATE_LINGER`` when
busy) in one message per JobMaster. An update that gets no acknowledgement is sent again
after a backoff; one given up on after ``MAX_TRIES`` is no longer listed as reporting in
execution reports, so the JobMaster's reconciliation fails its attempt as lost instead of
waiting for ever. Flink's ``TaskExecutor.updateTaskExecutionState`` retries the same way.

Main thread of the TaskExecutor only (``Endpoint``): no locks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.gateways import JobMasterGateway
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.rpc import FencingTokenMismatchError, FrameTooLargeError, RemoteError
from clusterdeck.core.rpc.outbox import Linger, Outbox, send_in_halves
from clusterdeck.core.taskmanager.endpoint import Endpoint

log = logging.getLogger(__name__)

UPDATES_PER_MESSAGE = 64  # an UpdateTaskExecutionStates' most updates
# Updates go at most once per UPDATE_LINGER: while tasks end by the hundred a second, a
# short task's RUNNING and FINISHED and the next task's RUNNING share one message (the
# JobMaster deploys ahead and does not wait for them). An update after a quiet spell goes
# at once: a lone job's latency is not taxed.
UPDATE_LINGER = 0.005

# An unacknowledged update is sent again after FIRST_RETRY_DELAY * 2 ** tries seconds, at
# most MAX_RETRY_DELAY: quick while a broker restarts, then not more than every two
# seconds. MAX_TRIES of them wait about 33 s (plus each ask's own timeout): longer than a
# broker restart or a JobManager failover takes. An update still unanswered then goes to
# a JobMaster that is gone or that has its reconciliation to find the attempt lost.
FIRST_RETRY_DELAY = 0.1
MAX_RETRY_DELAY = 2.0
MAX_TRIES = 20


def retry_delay(tries: int) -> float:
    """Seconds before an update sent ``tries + 1`` times without an answer goes again."""
    return min(MAX_RETRY_DELAY, FIRST_RETRY_DELAY * 2 ** tries)


def is_fenced(error: BaseException | None) -> bool:
    """Whether an ask's error says its JobMaster has a new leader's token: its updates are
    of no use to anyone any more."""
    return isinstance(error, RemoteError) and \
        error.type_name == FencingTokenMismatchError.__name__


# A state update waiting to be sent: the deployment it concerns, the update, tries so far.
Report = tuple[p.SubmitTask, p.UpdateTaskExecutionState, int]


class StateUpdates:
    """The updates on their way to the JobMasters, and the attempts still reporting."""

    def __init__(self, endpoint: Endpoint,
                 before_sending: Callable[[], None] = lambda: None) -> None:
        """``before_sending``: called on each flush before the updates go (the ended
        attempts' last numbers go ahead of their end)."""
        self._endpoint = endpoint
        self._before_sending = before_sending
        self._reporting: dict[str, str] = {}  # attempt -> job, final update not yet answered
        self._outbox: Outbox[tuple[str, str], Report] = Outbox(UPDATES_PER_MESSAGE)
        self._linger = Linger(UPDATE_LINGER)

    def reporting(self, job_id: str) -> tuple[str, ...]:
        """The job's attempts that ended here and whose final update is not answered yet."""
        return tuple(a for a, job in self._reporting.items() if job == job_id)

    def report(self, deployment: p.SubmitTask, update: p.UpdateTaskExecutionState,
               tries: int = 0) -> None:
        """Queued: the updates of this turn go to each JobMaster in one message, sent until
        acknowledged. Until then a final one's attempt is listed as still reporting."""
        if update.state.is_terminal:
            self._reporting[update.attempt_id] = update.job_id
        if self._outbox.add((deployment.jobmaster, deployment.fencing_token),
                            (deployment, update, tries)):
            wait = self._linger.delay(time.monotonic())
            if wait > 0:
                self._endpoint.schedule(wait, self._send)
            else:
                self._endpoint.run_async(self._send)

    def _send(self) -> None:
        self._linger.flushed(time.monotonic())
        self._before_sending()
        for (jobmaster, token), reports in self._outbox.take():
            gateway = self._endpoint.rpc_service.gateway(JobMasterGateway, jobmaster, token)
            send_in_halves(reports, lambda batch, to=gateway: self._send_batch(to, batch),
                           self._too_large)

    def _send_batch(self, jobmaster: JobMasterGateway, reports: tuple[Report, ...]) -> None:
        sent = jobmaster.update_task_execution_states(
            p.UpdateTaskExecutionStates(tuple(update for _, update, _ in reports)))
        self._endpoint.on_main_thread(sent, lambda answer, error: self._answered(
            reports, answer, error))

    def _too_large(self, report: Report, error: FrameTooLargeError) -> None:
        """Dropping it would leave the job RUNNING for ever: the attempt fails instead,
        with a cause that names the limit, in an update that is small by design."""
        deployment, update, tries = report
        log.error("update %s of %s is too large to send: %s", update.state,
                  update.attempt_id, error)
        self.report(deployment, p.UpdateTaskExecutionState(
            update.job_id, update.attempt_id, ExecutionState.FAILED,
            TaskFailure(FrameTooLargeError.__name__, f"the task's {update.state} update could "
                        f"not be sent: {error}")), tries)

    def _answered(self, reports: tuple[Report, ...], answer: Any,
                  error: BaseException | None) -> None:
        acknowledgements = answer.acknowledgements if \
            isinstance(answer, p.UpdatesAcknowledged) else ()
        if error is None and len(acknowledgements) != len(reports):
            error = ValueError(f"{len(acknowledgements)} acknowledgements of "
                               f"{len(reports)} updates")
        fenced = is_fenced(error)
        for index, (deployment, update, tries) in enumerate(reports):
            if error is None or fenced:
                self._reporting.pop(update.attempt_id, None)
                ack = acknowledgements[index] if acknowledgements else None
                if ack is not None and not ack.accepted:
                    log.info("update %s of %s not accepted: %s", update.state,
                             update.attempt_id, ack.reason)
            elif tries >= MAX_TRIES:
                self._reporting.pop(update.attempt_id, None)
                log.error("giving up on reporting %s of %s: %s", update.state,
                          update.attempt_id, error)
            else:
                self._endpoint.schedule(retry_delay(tries), self.report, deployment, update,
                                        tries + 1)
