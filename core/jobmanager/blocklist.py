"""The TaskManagers one job stops choosing for a while, after Flink's BlocklistHandler
(``cluster.resource-blocklist.item.timeout``).

An attempt that failed for want of something its TaskManager's host lacks (a full work
dir: ``DiskFull``) fails again on that TaskManager: a restart there only counts down the
restart strategy. The TaskManager is blocked for ``jobmanager.blocklist.timeout``: the job's
slot requests carry the blocked ids (the ResourceManager offers none of their slots), a
slot of a blocked TaskManager the job held goes back rather than to a waiting attempt, and
an offer made before the block is handed back and asked for again, and the attempts sent
there that have not started are cancelled and run elsewhere (``Scheduler.leave_avoided``),
counting no failure. The blocks end with the job, their timers cancelled. When no other
TaskManager has a slot, the requests wait for the block to end, then go to the blocked one
again: the wait is bounded by the timeout, the failures that follow by the restart
strategy.

A consumer whose fetch of a producer's partitions got no answer at all (refused, stalled,
cut off each try: a port closed one way, two machines parted) blames the producer's
TaskManager instead (``TaskFailure.unreachable``): blocked, the producers it ran run again
elsewhere, so the job recovers while the port stays closed. Only the producers' own hosts
may be named so (``vouched``), and a blocked TaskManager's word against another does not
block that one: two machines parted from each other would otherwise block both, and the
job would wait out the block with nowhere to run.

Only causes that blame the host block it; a failure of the task's own code does not. State
of the JobMaster's main thread: blocks start on a failure and end by the JobMaster's timer,
so nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.protocol.failures import (
    DISK_FULL,
    FailureRecord,
    TaskFailure,
    unreachable_ids,
)

HOST_BLAMING = frozenset({DISK_FULL})
"""Failure types that blame the TaskManager's host resources, not the task: a restart on
the same TaskManager would meet the same full disk."""
TOLD_AGAIN_AFTER = 5.0
"""Seconds a block must grow by to be told again: the attempts of every slot of a full
disk fail within moments of each other, and one event says it for all of them."""


class Timer(Protocol):
    """What the JobMaster's ``schedule`` returns (rpc's ScheduledCall)."""

    def cancel(self) -> None: ...


@dataclass(frozen=True)
class Block:
    """``taskmanager_id`` is not chosen until ``until`` (wall time, as the failure's) because
    an attempt failed there with ``cause``."""

    taskmanager_id: str
    cause: str
    reason: str
    until: float

    def summary(self) -> str:
        until = datetime.fromtimestamp(self.until, UTC).strftime("%H:%M:%S UTC")
        return (f"TaskManager {self.taskmanager_id} blocked until {until}: no new work "
                f"there while others have slots, after {self.cause}: {self.reason}")


class Blocklist:
    def __init__(self, timeout: float, schedule: Callable[[float, Callable[[], None]], Timer],
                 blocked: Callable[[FailureRecord, str, str], None],
                 changed: Callable[[], None]) -> None:
        """``schedule(delay, fn)`` runs ``fn`` on the JobMaster's main thread later;
        ``blocked(failure, summary, taskmanager_id)`` tells the job's observers of a new or
        longer block of ``taskmanager_id`` (the job's chain of causes); ``changed()``
        after a block starts or ends (the slot requests out go again)."""
        self.timeout = timeout
        self._schedule = schedule
        self._blocked = blocked
        self._changed = changed
        self._blocks: dict[str, Block] = {}
        self._timers: dict[str, Timer] = {}  # the timer that ends each block

    def failed(self, failure: FailureRecord | None) -> tuple[Block, ...]:
        """An attempt moved, with its failure if it failed: its TaskManager is blocked
        (again, for longer) if the cause blames the host, and so are the producers'
        TaskManagers it found unreachable; the new or longer blocks."""
        if failure is None or self.timeout <= 0:
            return ()
        return tuple(block for taskmanager_id, cause in self._blamed(failure)
                     if (block := self._block(taskmanager_id, cause, failure)) is not None)

    def _blamed(self, failure: FailureRecord) -> Iterator[tuple[str, str]]:
        """The TaskManagers a failure blames, each with the cause to name."""
        reporter = failure.taskmanager_id
        if failure.exception_type in HOST_BLAMING and reporter:
            yield reporter, failure.exception_type
        for taskmanager_id in failure.failure.unreachable:
            if taskmanager_id == reporter:  # the JobManager's own fetch of what it left
                yield taskmanager_id, (f"{failure.exception_type} (its data service did not "
                                       f"answer the JobManager)")
            elif reporter not in self._blocks:
                yield taskmanager_id, (f"{failure.exception_type} (its data service did not "
                                       f"answer {reporter})")

    def _block(self, taskmanager_id: str, cause: str, failure: FailureRecord) -> Block | None:
        block = Block(taskmanager_id, cause, failure.message, failure.timestamp + self.timeout)
        known = self._blocks.get(taskmanager_id)
        if known is not None and known.until >= block.until:
            return None  # a sibling's failure heard late: the block holds already
        self._blocks[taskmanager_id] = block
        if known is not None:  # the longer block's timer ends it
            self._timers.pop(taskmanager_id).cancel()
        self._timers[taskmanager_id] = self._schedule(self.timeout,
                                                      lambda: self._expired(block))
        if known is None or block.until - known.until >= TOLD_AGAIN_AFTER:
            self._blocked(failure, block.summary(), taskmanager_id)
        if known is None:
            self._changed()
        return block

    def __contains__(self, taskmanager_id: object) -> bool:
        """Whether no new work should go to the TaskManager now."""
        return taskmanager_id in self._blocks

    def blocked(self) -> tuple[str, ...]:
        """The blocked TaskManagers, in the order they were blocked."""
        return tuple(self._blocks)

    def end(self) -> None:
        """The job ended: its blocks end with it, their timers cancelled (a JobMaster that
        ended sends no requests and takes no new work)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._blocks.clear()

    def _expired(self, block: Block) -> None:
        if self._blocks.get(block.taskmanager_id) is block:  # not extended since
            del self._blocks[block.taskmanager_id]
            del self._timers[block.taskmanager_id]
            self._changed()


def vouched(failure: TaskFailure | None, graph: ExecutionGraph, attempt_id: str
            ) -> TaskFailure | None:
    """A reported failure of ``attempt_id`` with only the unreachable TaskManagers it may
    name, at most ``MAX_UNREACHABLE``: hosts of its lost producers, or of the producers
    its subtask reads now (a stream's). A TaskManager's word is data: a stolen login
    could otherwise block any TaskManager."""
    if failure is None or not failure.unreachable:
        return failure
    hosts = {e.taskmanager_id for p in failure.lost_producers
             if (e := graph.execution(p)) is not None}
    execution = graph.execution(attempt_id)
    if execution is not None:
        hosts.update(v.current.taskmanager_id for v in graph.producers_of(
            graph.subtask(execution.vertex_id, execution.subtask)))
    return replace(failure, unreachable=unreachable_ids(
        t for t in failure.unreachable if t in hosts))
