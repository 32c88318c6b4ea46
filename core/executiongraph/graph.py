"""The ExecutionGraph: a JobGraph expanded to subtasks and attempts, plus the job's status.

JobVertex -> ExecutionJobVertex -> ExecutionVertex (one per subtask) -> Execution (one per
attempt). The graph is the model; it answers questions (is this attempt current? are this
vertex's inputs ready? which partitions does subtask j read?) and renders itself as a
snapshot, but it decides nothing: the Scheduler drives every change.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdeck.core.executiongraph.execution import Execution, ExecutionVertex
from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.jobgraph import JobEdge, JobGraph, JobVertex
from clusterdeck.core.protocol.snapshots import (
    JobGraphSnapshot,
    JobProgress,
    OperatorSnapshot,
    VertexSnapshot,
)
from clusterdeck.core.protocol.states import ExecutionState, IllegalTransition, JobStatus
from clusterdeck.core.protocol.wiring import (
    EdgeInput,
    EdgeOutput,
    ResultPartitionRef,
    check_edge,
    consumed_partitions,
    partitions_per_producer,
)


class ExecutionJobVertex:
    """All subtasks of one JobVertex."""

    def __init__(self, job_id: str, job_vertex: JobVertex,
                 inputs: list[JobEdge], outputs: list[JobEdge], epoch: int = 0) -> None:
        if job_vertex.parallelism < 1:
            raise ValueError(f"vertex {job_vertex.id!r} needs a parallelism of at least 1")
        self.job_vertex = job_vertex
        self.inputs = inputs
        self.outputs = outputs
        self.subtasks = [ExecutionVertex(job_id, job_vertex.id, index, epoch)
                         for index in range(job_vertex.parallelism)]
        # Subtasks whose current attempt is not FINISHED, kept by ExecutionGraph.moved,
        # new_attempt and restore: "is the vertex (the job) done?" after every FINISHED
        # of a 10,000-subtask job must not look at every subtask.
        self.unfinished = len(self.subtasks)
        self.unstopped = len(self.subtasks)  # current attempt not terminal, likewise

    @property
    def id(self) -> str:
        return self.job_vertex.id

    @property
    def name(self) -> str:
        return self.job_vertex.name

    @property
    def parallelism(self) -> int:
        return self.job_vertex.parallelism

    def snapshot(self) -> VertexSnapshot:
        states = [subtask.current.state for subtask in self.subtasks]
        return VertexSnapshot(
            id=self.id, name=self.name, parallelism=self.parallelism,
            is_source=self.job_vertex.is_source, is_sink=self.job_vertex.is_sink,
            operators=tuple(OperatorSnapshot(op.id, op.kind, op.name)
                            for op in self.job_vertex.operators),
            state_counts={state: states.count(state)
                          for state in ExecutionState if state in states},
            subtasks=tuple(subtask.snapshot() for subtask in self.subtasks))


class ExecutionGraph:
    """The runtime view of one job; vertices are kept in topological order.

    ``epoch`` numbers the JobManager runs of the job (0 first, one more per recovery); it
    is part of every attempt id this graph issues, so no id of an earlier run comes back.
    """

    def __init__(self, job_graph: JobGraph, job_id: str, *, epoch: int = 0) -> None:
        if epoch < 0:
            raise ValueError(f"epoch cannot be negative, got {epoch}")
        self.job_graph = job_graph
        self.job_id = job_id
        self.epoch = epoch
        self.vertices: dict[str, ExecutionJobVertex] = {
            vertex.id: ExecutionJobVertex(job_id, vertex, job_graph.inputs_of(vertex.id),
                                          job_graph.outputs_of(vertex.id), epoch)
            for vertex in job_graph.topological_order()
        }
        for edge in job_graph.edges:
            check_edge(edge, self.vertices[edge.source].parallelism,
                       self.vertices[edge.target].parallelism)
        self.status = JobStatus.CREATED
        self.status_timestamps: dict[JobStatus, float] = {}
        self.failures: list[FailureRecord] = []
        self._executions: dict[str, Execution] = {
            subtask.current.attempt_id: subtask.current for subtask in self.subtasks()}

    # -- lookups ---------------------------------------------------------------------------

    def vertex(self, vertex_id: str) -> ExecutionJobVertex:
        return self.vertices[vertex_id]

    def subtask(self, vertex_id: str, subtask: int) -> ExecutionVertex:
        return self.vertices[vertex_id].subtasks[subtask]

    def subtasks(self) -> Iterator[ExecutionVertex]:
        for vertex in self.vertices.values():
            yield from vertex.subtasks

    def execution(self, attempt_id: str) -> Execution | None:
        """Any attempt ever made, current or not; None for an id the job never issued."""
        return self._executions.get(attempt_id)

    def is_current(self, execution: Execution) -> bool:
        return self.subtask(execution.vertex_id, execution.subtask).current is execution

    def current_executions(self) -> Iterator[Execution]:
        for subtask in self.subtasks():
            yield subtask.current

    def consumers_of(self, vertex_id: str) -> list[ExecutionJobVertex]:
        return [self.vertices[edge.target] for edge in self.vertices[vertex_id].outputs]

    # -- changes the scheduler makes -------------------------------------------------------

    def new_attempt(self, subtask: ExecutionVertex) -> Execution:
        replaced = subtask.current.state
        execution = subtask.new_attempt()
        self._executions[execution.attempt_id] = execution
        self.moved(execution, replaced, execution.state)
        return execution

    def moved(self, execution: Execution, old: ExecutionState, new: ExecutionState) -> None:
        """Count a subtask's current attempt moving from ``old`` to ``new`` (called by
        whatever moves it: the scheduler, new_attempt, restore)."""
        if not self.is_current(execution):
            return
        vertex = self.vertices[execution.vertex_id]
        finished = ExecutionState.FINISHED
        if (old is finished) != (new is finished):
            vertex.unfinished += 1 if old is finished else -1
        if old.is_terminal != new.is_terminal:
            vertex.unstopped += 1 if old.is_terminal else -1

    def all_finished(self) -> bool:
        return all(vertex.unfinished == 0 for vertex in self.vertices.values())

    def all_stopped(self) -> bool:
        """Every subtask's current attempt is terminal."""
        return all(vertex.unstopped == 0 for vertex in self.vertices.values())

    def restore(self, execution: Execution) -> None:
        """Put back an attempt that finished in an earlier JobManager run, in place of
        its subtask's unstarted attempt; consumers will read its partitions."""
        subtask = self.subtask(execution.vertex_id, execution.subtask)
        old = subtask.current.state
        for replaced in subtask.restore(execution):
            del self._executions[replaced.attempt_id]
        self._executions[execution.attempt_id] = execution
        self.moved(execution, old, execution.state)

    def transition(self, new: JobStatus, now: float) -> JobStatus:
        """Move the job to ``new`` and return the old status."""
        old = self.status
        if not old.can_become(new):
            raise IllegalTransition(f"job {self.job_id}: {old} -> {new}")
        self.status = new
        self.status_timestamps[new] = now
        return old

    # -- blocking exchange -----------------------------------------------------------------

    def inputs_available(self, vertex_id: str) -> bool:
        """All producers on all input edges finished with usable partitions (vacuous for
        sources): a blocking consumer can start."""
        return all(subtask.current.has_usable_partitions
                   for edge in self.vertices[vertex_id].inputs
                   for subtask in self.vertices[edge.source].subtasks)

    def producers_of(self, subtask: ExecutionVertex) -> list[ExecutionVertex]:
        """The producer subtasks whose partitions ``subtask`` reads, edge by edge."""
        consumer = self.vertices[subtask.vertex_id]
        producers: list[ExecutionVertex] = []
        for edge in consumer.inputs:
            source = self.vertices[edge.source]
            for producer, _ in consumed_partitions(edge.ship_strategy, subtask.subtask,
                                                   source.parallelism):
                producers.append(source.subtasks[producer])
        return producers

    def consumers_reading(self, producer: ExecutionVertex) -> list[ExecutionVertex]:
        """The consumer subtasks that read some partition of ``producer``."""
        source = self.vertices[producer.vertex_id]
        consumers: dict[str, ExecutionVertex] = {}
        for edge in source.outputs:
            for subtask in self.vertices[edge.target].subtasks:
                pairs = consumed_partitions(edge.ship_strategy, subtask.subtask,
                                            source.parallelism)
                if any(p == producer.subtask for p, _ in pairs):
                    consumers[subtask.id] = subtask
        return list(consumers.values())

    def partitions_needed(self, producer: ExecutionVertex) -> bool:
        """True while some consumer subtask reading ``producer``'s partitions has not
        finished: losing them then means computing them again."""
        return any(consumer.current.state is not ExecutionState.FINISHED
                   for consumer in self.consumers_reading(producer))

    def input_partitions(self, vertex_id: str, subtask: int) -> tuple[EdgeInput, ...]:
        """The partitions subtask ``subtask`` reads, per input edge, from the producers'
        current (finished) attempts."""
        inputs = []
        for edge in self.vertices[vertex_id].inputs:
            source = self.vertices[edge.source]
            refs = []
            for producer, partition in consumed_partitions(edge.ship_strategy, subtask,
                                                           source.parallelism):
                execution = source.subtasks[producer].current
                refs.append(ResultPartitionRef(execution.attempt_id, source.id, producer,
                                               partition, execution.taskmanager_id))
            inputs.append(EdgeInput(edge.input_index, source.id, edge.ship_strategy,
                                    tuple(refs)))
        return tuple(inputs)

    def stream_producers(self, vertex_id: str, subtask: int) -> list[tuple[Execution, int]]:
        """A streaming consumer subtask's producers: each one's current attempt and the
        subpartition of its output this subtask reads, edge by edge."""
        producers = []
        for edge in self.vertices[vertex_id].inputs:
            source = self.vertices[edge.source]
            for producer, partition in consumed_partitions(edge.ship_strategy, subtask,
                                                           source.parallelism):
                producers.append((source.subtasks[producer].current, partition))
        return producers

    def output_partitions(self, vertex_id: str) -> tuple[EdgeOutput, ...]:
        """The partitions each subtask of ``vertex_id`` writes, per output edge."""
        return tuple(
            EdgeOutput(edge.target, edge.ship_strategy,
                       partitions_per_producer(edge.ship_strategy,
                                               self.vertices[edge.target].parallelism))
            for edge in self.vertices[vertex_id].outputs)

    # -- for observers ---------------------------------------------------------------------

    @property
    def root_cause(self) -> FailureRecord | None:
        return self.failures[0] if self.failures else None

    def progress(self) -> tuple[int, int]:
        """(finished subtasks, all subtasks), counting current attempts only."""
        states = [execution.state for execution in self.current_executions()]
        return states.count(ExecutionState.FINISHED), len(states)

    def snapshot(self) -> JobGraphSnapshot:
        """The whole graph as data (a message's field), enough for an observer to redraw
        it; the JobMaster adds ``hosts``."""
        finished, total = self.progress()
        return JobGraphSnapshot(
            job_id=self.job_id, name=self.job_graph.name, epoch=self.epoch,
            kind=self.job_graph.kind, status=self.status,
            status_timestamps=dict(self.status_timestamps),
            progress=JobProgress(finished, total),
            vertices=tuple(vertex.snapshot() for vertex in self.vertices.values()),
            edges=tuple(self.job_graph.edges), failures=tuple(self.failures),
            root_cause=self.root_cause)
