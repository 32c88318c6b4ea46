"""A deployed task's inputs, and the failure it reports when one of them cannot be read:
a PartitionNotFound that names the partition and its producer, down to the TaskManager
that wrote it, and lists the producer attempts failover must run again."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from clusterdeck.core.engine.exchange import declare_partitions, read_inputs
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.failures import TaskFailure
from clusterdeck.core.protocol.jobgraph import JobEdge, JobGraph, JobKind, ShipStrategy
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.protocol.wiring import EdgeInput, ResultPartitionRef
from clusterdeck.core.protocol.workdir import partitions_dir
from clusterdeck.core.rpc import from_data, to_data
from clusterdeck.core.taskmanager.attemptlogs import AttemptLogHandler
from clusterdeck.core.taskmanager.runner import input_partitions
from clusterdeck.core.taskmanager.tasks import Task, TaskOutcome, TaskServices

PRODUCERS = (ResultPartitionRef("job/map#0/a0", "map", 0, 1, "tm-1"),
             ResultPartitionRef("job/map#1/a0", "map", 1, 1, "tm-2"))


def deployment(work_dir: Path) -> p.SubmitTask:
    """Subtask 1 of ``sink``, reading partition 1 of both ``map`` subtasks."""
    return p.SubmitTask("job", JobGraph("j", JobKind.DATAFLOW, ()), "job/sink#1/a0", "sink", 1,
                        2, 0, 0, "alloc", "jobmaster.job", "token", "sha", str(work_dir),
                        inputs=(EdgeInput(0, "map", ShipStrategy.HASH, PRODUCERS),))


def producer_finished(work_dir: Path, attempt_id: str) -> None:
    """The producer attempt's output for the sink, as it leaves it when it finishes."""
    declare_partitions(str(partitions_dir(work_dir, attempt_id)),
                       JobEdge("map", "sink", ShipStrategy.HASH), consumer_parallelism=2)


def reading_inputs(_spark: Any, _job: Any, task_deployment: p.SubmitTask,
                   _task: Any) -> p.TaskResult:
    """A runner that gets as far as any run gets first: checking its input partitions."""
    read_inputs(SimpleNamespace(attempt_id=task_deployment.attempt_id),  # type: ignore[arg-type]
                input_partitions(task_deployment, task_deployment.work_dir))
    raise AssertionError("every input was found")


def run(task_deployment: p.SubmitTask, tmp_path: Path) -> TaskOutcome:
    outcomes: list[TaskOutcome] = []
    ended = threading.Event()
    ready: Future[Any] = Future()
    ready.set_result(object())
    services = TaskServices(ready, ready, lambda _sequence: None,
                            AttemptLogHandler(tmp_path / "logs"))
    task = Task(task_deployment, services, reading_inputs,
                lambda _task, outcome: (outcomes.append(outcome), ended.set()))
    task.start()
    assert ended.wait(10), "the task did not end"
    return outcomes[0]


def test_each_input_partition_is_found_in_its_producers_folder_and_knows_its_producer(
        tmp_path) -> None:
    (edge,) = input_partitions(deployment(tmp_path), str(tmp_path))

    assert [i.path for i in edge] == [
        str(tmp_path / "partitions" / "job_map-0_a0" / "sink.0" / "__part=1"),
        str(tmp_path / "partitions" / "job_map-1_a0" / "sink.0" / "__part=1")]
    assert [i.producer for i in edge] == list(PRODUCERS)
    assert {(i.target_vertex_id, i.input_index) for i in edge} == {("sink", 0)}


def test_a_task_missing_an_input_partition_fails_with_partition_not_found(tmp_path) -> None:
    producer_finished(tmp_path, "job/map#0/a0")  # map#1's output is not visible here

    outcome = run(deployment(tmp_path), tmp_path)

    assert outcome.state is ExecutionState.FAILED
    failure = outcome.failure
    assert failure is not None
    assert failure.exception_type == "PartitionNotFound"
    assert failure.lost_producers == ("job/map#1/a0",)
    missing = tmp_path / "partitions" / "job_map-1_a0" / "sink.0" / "__part=1"
    assert failure.message == (
        f"result partition not found: partition 1 of input 0 of sink at {missing}, written "
        f"by map[1] (attempt job/map#1/a0 on TaskManager tm-2): its folder does not exist")
    assert "PartitionNotFound: result partition not found" in failure.traceback


def test_the_lost_producers_reach_the_jobmaster_through_the_codec() -> None:
    failure = TaskFailure("PartitionNotFound", "result partition not found: ...",
                          lost_producers=("job/map#1/a0",))
    update = p.UpdateTaskExecutionState("job", "job/sink#1/a0", ExecutionState.FAILED, failure)

    received = from_data(json.loads(json.dumps(to_data(update))), p.UpdateTaskExecutionState)

    assert received.failure == failure
    assert TaskFailure.from_dict(failure.to_dict()) == failure
    assert TaskFailure.from_dict({"exception_type": "ValueError"}).lost_producers == ()


def test_only_attempt_zero_of_the_first_run_is_first_of_its_subtask(tmp_path: Path) -> None:
    from dataclasses import replace

    from clusterdeck.core.taskmanager.runner import first_of_its_subtask
    first = deployment(tmp_path)
    assert first_of_its_subtask(first)
    assert not first_of_its_subtask(replace(first, attempt=1, attempt_id="job/sink#1/a1"))
    assert not first_of_its_subtask(replace(first, attempt_id="job/sink#1/e1a0"))
