"""Shared builders for the executiongraph tests: job graphs and a harness that plays the
ResourceManager and the TaskManagers by carrying out the scheduler's instructions.

No tests live here; the other test_executiongraph_* modules import it.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from clusterdeck.core.executiongraph import (
    AllocateSlot,
    DeployTask,
    ExecutionGraph,
    ExecutionState,
    InputSplitAssigner,
    Instruction,
    ReleaseSlot,
    RestartStrategy,
    Scheduler,
    SlotRef,
    WithdrawSlotRequest,
)
from clusterdeck.core.protocol.jobgraph import (
    JobEdge,
    JobGraph,
    JobKind,
    JobVertex,
    OperatorSpec,
    ShipStrategy,
)
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.rpc import from_data, to_data

JOB_ID = "job-1"


def through_the_wire(snapshot: JobGraphSnapshot) -> JobGraphSnapshot:
    """``snapshot`` as an observer gets it: as JSON text, read back and checked by the
    codec."""
    return from_data(json.loads(json.dumps(to_data(snapshot))), JobGraphSnapshot)


def vertex(vertex_id: str, parallelism: int, *kinds: str) -> JobVertex:
    operators = tuple(OperatorSpec(f"{vertex_id}.{n}", kind, kind) for n, kind in enumerate(kinds))
    return JobVertex(id=vertex_id, name=vertex_id.title(), parallelism=parallelism,
                     operators=operators)


def word_count(sources: int = 3, reducers: int = 2,
               strategy: ShipStrategy = ShipStrategy.HASH) -> JobGraph:
    """source (text, flat_map) -strategy-> reduce (reduce, sink)."""
    return JobGraph(
        name="word-count", kind=JobKind.DATAFLOW,
        vertices=(vertex("source", sources, "source.text", "flat_map"),
                  vertex("reduce", reducers, "reduce", "sink.text")),
        edges=(JobEdge("source", "reduce", strategy),))


def three_stages() -> JobGraph:
    """source p=2 -FORWARD-> map p=2 -HASH-> sink p=1."""
    return JobGraph(
        name="three-stages", kind=JobKind.DATAFLOW,
        vertices=(vertex("source", 2, "source.range"), vertex("map", 2, "map"),
                  vertex("sink", 1, "sink.collect")),
        edges=(JobEdge("source", "map", ShipStrategy.FORWARD),
               JobEdge("map", "sink", ShipStrategy.HASH)))


class Harness:
    """A job's scheduler plus a make-believe cluster that grants slots and runs tasks.

    Every event advances the clock by one second, so timestamps are distinct and tests
    never sleep. ``log`` holds every instruction the scheduler returned, in order.
    """

    def __init__(self, job_graph: JobGraph, restart: RestartStrategy | None = None,
                 splits: InputSplitAssigner | None = None,
                 slots: dict[str, int] | None = None, epoch: int = 0,
                 **options: Any) -> None:
        self.graph = ExecutionGraph(job_graph, JOB_ID, epoch=epoch)
        # One attempt per slot unless a test asks for deploy-ahead (test_scheduler_ahead)
        options.setdefault("deploy_ahead", 0.0)
        self.scheduler = Scheduler(self.graph, restart, splits, **options)
        self.now = 0.0
        self.log: list[Instruction] = []
        self.free_slots: deque[SlotRef] = deque(
            SlotRef(tm, index)
            for tm, count in (slots or {"tm-1": 2, "tm-2": 2}).items()
            for index in range(count))
        self.slot_requests: deque[AllocateSlot] = deque()

    # -- the clock and the log -------------------------------------------------------------

    def tick(self, seconds: float = 1.0) -> float:
        self.now += seconds
        return self.now

    def feed(self, instructions: list[Instruction]) -> list[Instruction]:
        """Record instructions and carry out the slot ones, as the ResourceManager would."""
        for instruction in instructions:
            if isinstance(instruction, AllocateSlot):
                self.slot_requests.append(instruction)
            elif isinstance(instruction, ReleaseSlot):
                self.free_slots.append(instruction.slot)
            elif isinstance(instruction, WithdrawSlotRequest):
                self.slot_requests = deque(r for r in self.slot_requests
                                           if r.attempt_id != instruction.attempt_id)
        self.log += instructions
        for vertex in self.graph.vertices.values():  # the counts the scheduler relies on
            assert vertex.unfinished == sum(
                s.current.state is not ExecutionState.FINISHED for s in vertex.subtasks)
            assert vertex.unstopped == sum(
                not s.current.state.is_terminal for s in vertex.subtasks)
        return instructions

    def logged(self, kind: type) -> list[Any]:
        return [instruction for instruction in self.log if isinstance(instruction, kind)]

    # -- events ----------------------------------------------------------------------------

    def start(self) -> list[Instruction]:
        return self.feed(self.scheduler.start(self.tick()))

    def grant_slots(self) -> list[Instruction]:
        """Offer free slots for as many outstanding requests as there are slots."""
        out: list[Instruction] = []
        while self.slot_requests and self.free_slots:
            self.slot_requests.popleft()
            slot = self.free_slots.popleft()
            out += self.feed(self.scheduler.slot_offered(slot.taskmanager_id, slot.slot_index,
                                                         self.tick()))
        return out

    def report(self, attempt_id: str, state: ExecutionState | str,
               **details: Any) -> list[Instruction]:
        return self.feed(self.scheduler.task_state_changed(attempt_id, state, self.tick(),
                                                           **details))

    def lose(self, taskmanager_id: str, cause: str = "heartbeat timeout") -> list[Instruction]:
        self.free_slots = deque(s for s in self.free_slots if s.taskmanager_id != taskmanager_id)
        return self.feed(self.scheduler.taskmanager_lost(taskmanager_id, cause, self.tick()))

    def restart_due(self, at: float) -> list[Instruction]:
        self.now = max(self.now, at)
        return self.feed(self.scheduler.restart_due(self.now))

    def cancel(self) -> list[Instruction]:
        return self.feed(self.scheduler.cancel(self.tick()))

    # -- the cluster's side ----------------------------------------------------------------

    def attempt(self, vertex_id: str, subtask: int) -> str:
        return self.graph.subtask(vertex_id, subtask).current.attempt_id

    def state(self, vertex_id: str, subtask: int) -> ExecutionState:
        return self.graph.subtask(vertex_id, subtask).current.state

    def deployments(self) -> dict[str, DeployTask]:
        """The DeployTask of every attempt that is deploying or running right now."""
        active = (ExecutionState.DEPLOYING, ExecutionState.RUNNING)
        return {d.attempt_id: d for d in self.logged(DeployTask)
                if (e := self.graph.execution(d.attempt_id)) and e.state in active}

    def run_deployed(self, finish: bool = True) -> list[Instruction]:
        """Every deployed task reports RUNNING, then (``finish``) FINISHED."""
        out: list[Instruction] = []
        for attempt_id in self.deployments():
            if self.graph.execution(attempt_id).state is ExecutionState.DEPLOYING:
                out += self.report(attempt_id, ExecutionState.RUNNING)
            if finish:
                out += self.report(attempt_id, ExecutionState.FINISHED)
        return out

    def run_to_end(self, rounds: int = 20) -> None:
        """Grant slots and finish tasks until the job stops changing."""
        for _ in range(rounds):
            if not (self.grant_slots() + self.run_deployed()):
                return
