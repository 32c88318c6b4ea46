"""What running scripts print, handed on to their JobMasters for the submitters to show.

Every ``OUTPUT_INTERVAL`` while tasks run, what each printed since the last tick goes to
its JobMaster in ``TaskOutput`` pieces (at most ``OUTPUT_PIECES_PER_TICK`` per task, so a
chatty script cannot flood the broker), and the attempt log lines held in memory go to
disk. A task's last output goes when it ends, all of it, before its final state.

Main thread of the TaskExecutor only (``Endpoint``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.gateways import JobMasterGateway
from clusterdeck.core.protocol.workdir import printed_output_file
from clusterdeck.core.taskmanager.attemptlogs import AttemptLogHandler
from clusterdeck.core.taskmanager.endpoint import Endpoint
from clusterdeck.core.taskmanager.tasks import Task

OUTPUT_INTERVAL = 0.2  # seconds between two hand-ons of what running scripts printed
OUTPUT_PIECES_PER_TICK = 8  # per task: about 640,000 characters a second at most


class OutputRelay:
    """``running()``: the tasks running now."""

    def __init__(self, endpoint: Endpoint, logs: AttemptLogHandler,
                 running: Callable[[], Collection[Task]]) -> None:
        self._endpoint = endpoint
        self._logs = logs
        self._running = running
        self._ticking = False

    def tick_soon(self) -> None:
        """A task began: the ticks run (again) while tasks run."""
        if self._running() and not self._ticking:
            self._ticking = True
            self._endpoint.schedule(OUTPUT_INTERVAL, self._tick)

    def last_of(self, task: Task) -> None:
        """``task`` ended: all it printed since the last tick goes now."""
        self._send(task, most=None)

    def _tick(self) -> None:
        self._ticking = False
        self._logs.flush_held()
        for task in self._running():
            self._send(task)
        self.tick_soon()

    def _send(self, task: Task, most: int | None = OUTPUT_PIECES_PER_TICK) -> None:
        deployment = task.deployment
        jobmaster = self._endpoint.rpc_service.gateway(
            JobMasterGateway, deployment.jobmaster, deployment.fencing_token)
        for piece in task.live.take(p.OUTPUT_PIECE, most or sys.maxsize):
            jobmaster.task_output(p.TaskOutput(
                deployment.job_id, task.attempt_id, piece.stream,
                str(printed_output_file(deployment.work_dir, task.attempt_id, piece.stream)),
                piece.offset, piece.text))
