"""What the JobMaster does for its checkpoint coordinator: triggers go to the sources,
the metadata is written before the tasks hear a checkpoint completed, and failures that
exceed the tolerated ones fail the job. The endpoint is a stand-in that runs "worker"
work at once and keeps timers for the test to fire."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from clusterdeck.core.checkpointing import CheckpointStorage, CheckpointTask
from clusterdeck.core.jobmanager.checkpoints import JobCheckpoints
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpoints import CheckpointOptions, SharedStateFile, StateHandle
from tests.waiting import wait_for


class Endpoint:
    def __init__(self) -> None:
        self.timers: list[Any] = []

    def schedule(self, delay: float, fn: Any, *args: Any) -> Any:
        timer = Timer(fn, args)
        self.timers.append(timer)
        return timer

    def run_in_worker(self, fn: Any, *args: Any, name: str = "worker") -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as error:
            future.set_exception(error)
        return future

    def on_main_thread(self, future: Future, callback: Any) -> None:
        callback(None if future.exception() else future.result(), future.exception())

    def fire(self) -> None:
        """Run the timers armed last (the trigger, or the timeout)."""
        due = [t for t in self.timers if not t.cancelled]
        self.timers = []
        for timer in due:
            timer.fn(*timer.args)


class Timer:
    def __init__(self, fn: Any, args: tuple) -> None:
        self.fn, self.args, self.cancelled = fn, args, False

    def cancel(self) -> None:
        self.cancelled = True


TASKS = [CheckpointTask("v#0", "a0", source=True), CheckpointTask("v#1", "a1", source=True)]


def checkpoints(tmp_path: Path, **options: Any) -> tuple[JobCheckpoints, Endpoint, list, list]:
    endpoint, told, failed = Endpoint(), [], []
    driver = JobCheckpoints("job-1", CheckpointOptions(interval=1.0, **options),
                            CheckpointStorage(tmp_path), endpoint, lambda: TASKS,
                            lambda attempt, message: told.append((attempt, message)),
                            failed.append)
    driver.start()
    return driver, endpoint, told, failed


def test_a_checkpoint_is_recorded_on_disk_before_the_tasks_hear_it_completed(tmp_path):
    driver, endpoint, told, _ = checkpoints(tmp_path)
    endpoint.fire()
    assert [(a, type(m).__name__) for a, m in told] == [("a0", "TriggerCheckpoint"),
                                                        ("a1", "TriggerCheckpoint")]
    storage = CheckpointStorage(tmp_path)
    for attempt, subtask in (("a0", "v#0"), ("a1", "v#1")):
        state = storage.write_state("job-1", 1, subtask, b"{}")
        driver.acknowledged(p.AcknowledgeCheckpoint("job-1", attempt, subtask, 1, state))
    assert [m.checkpoint_id for _, m in told[2:]] == [1, 1]
    assert all(isinstance(m, p.NotifyCheckpointComplete) for _, m in told[2:])
    assert [c.checkpoint_id for c in storage.completed("job-1")[0]] == [1]
    assert driver.restore_of("v#1")[0] == 1 and driver.restore_of("v#1")[1] is not None


def test_a_declined_checkpoint_past_the_tolerated_fails_the_job(tmp_path):
    driver, endpoint, _, failed = checkpoints(tmp_path)
    endpoint.fire()
    driver.declined(p.DeclineCheckpoint("job-1", "a1", "v#1", 1, "disk full"))
    assert len(failed) == 1 and "v#1 declined: disk full" in failed[0]


def test_a_failover_aborts_the_checkpoint_without_failing_the_job(tmp_path):
    driver, endpoint, _, failed = checkpoints(tmp_path)
    endpoint.fire()
    driver.failing_over("a1 is FAILED")
    assert failed == [] and driver.coordinator.in_progress is None
    driver.stop()
    assert all(timer.cancelled for timer in endpoint.timers)


def test_an_acknowledgement_naming_another_subtasks_snapshot_fails_the_checkpoint(tmp_path):
    driver, endpoint, _, failed = checkpoints(tmp_path)
    endpoint.fire()
    other = CheckpointStorage(tmp_path).write_state("job-1", 1, "v#0", b"{}")
    driver.acknowledged(p.AcknowledgeCheckpoint("job-1", "a1", "v#1", 1, other))
    assert driver.coordinator.in_progress is None
    assert len(failed) == 1 and "v#1 declined: its acknowledgement names 'chk-1/v%230.state'" \
        in failed[0]


def with_savepoints(tmp_path: Path) -> tuple[JobCheckpoints, Endpoint, list]:
    from clusterdeck.core.checkpointing import Savepoints
    from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind, JobVertex, OperatorSpec
    graph = JobGraph("s", JobKind.STREAMING, (JobVertex("v", "rate", 2, (
        OperatorSpec("op1", "source.rate", {"rate": 1.0, "count": None}),)),))
    endpoint, told = Endpoint(), []
    driver = JobCheckpoints("job-1", CheckpointOptions(interval=1.0),
                            CheckpointStorage(tmp_path / "checkpoints"), endpoint,
                            lambda: TASKS, lambda attempt, message: told.append(message),
                            lambda reason: None, savepoints=Savepoints(tmp_path / "sp"),
                            graph=graph)
    driver.start()
    return driver, endpoint, told


def acknowledge(driver: JobCheckpoints, tmp_path: Path, checkpoint_id: int) -> None:
    storage = CheckpointStorage(tmp_path / "checkpoints")
    for attempt, subtask in (("a0", "v#0"), ("a1", "v#1")):
        state = storage.write_state("job-1", checkpoint_id, subtask, b"{}")
        driver.acknowledged(p.AcknowledgeCheckpoint("job-1", attempt, subtask, checkpoint_id,
                                                    state))


def test_a_stop_with_savepoint_is_answered_with_its_folder_before_the_tasks_commit(tmp_path):
    driver, endpoint, told = with_savepoints(tmp_path)
    answer = driver.savepoint(stop=True)
    endpoint.fire()
    assert [m.stop for m in told] == [True, True]
    acknowledge(driver, tmp_path, 1)
    done = answer.result(timeout=0)
    assert done.checkpoint_id == 1 and (Path(done.path) / "_metadata").is_file()
    assert [type(m).__name__ for m in told[2:]] == ["NotifyCheckpointComplete"] * 2


def test_a_savepoint_the_job_ends_before_is_answered_with_why(tmp_path):
    driver, _endpoint, _ = with_savepoints(tmp_path)
    answer = driver.savepoint(stop=False)
    driver.stop("the job ended CANCELED")
    error = answer.exception(timeout=0)
    assert "the job ended CANCELED before the savepoint completed" in str(error)


def test_the_tasks_hear_an_aborted_stop_so_their_sources_go_on(tmp_path):
    driver, endpoint, told = with_savepoints(tmp_path)
    answer = driver.savepoint(stop=True)
    endpoint.fire()
    driver.declined(p.DeclineCheckpoint("job-1", "a1", "v#1", 1, "disk full"))
    assert [type(m).__name__ for m in told[2:]] == ["NotifyCheckpointAborted"] * 2
    assert "v#1 declined: disk full" in str(answer.exception(timeout=0))
    assert not driver.savepoint(stop=False).done()  # a new one may be asked for now


def test_barriers_start_at_the_sources_then_at_tasks_whose_producers_all_finished():
    from clusterdeck.core.executiongraph import ExecutionGraph, ExecutionState
    from clusterdeck.core.jobmanager.checkpoints import tasks_to_checkpoint
    from tests.unit.core.executiongraph.helpers import JOB_ID, word_count

    graph = ExecutionGraph(word_count(sources=2, reducers=2), JOB_ID)
    for execution in graph.current_executions():
        execution.state = ExecutionState.RUNNING

    def starting() -> list[str]:
        return [task.subtask_id for task in tasks_to_checkpoint(graph) if task.source]

    assert starting() == ["source#0", "source#1"]
    first = graph.subtask("source", 0).current
    first.state = ExecutionState.FINISHED
    graph.moved(first, ExecutionState.RUNNING, ExecutionState.FINISHED)
    assert starting() == ["source#1"]   # reduce still gets barriers from source#1
    last = graph.subtask("source", 1).current
    last.state = ExecutionState.FINISHED
    graph.moved(last, ExecutionState.RUNNING, ExecutionState.FINISHED)
    # no barrier can reach the reducers any more: they are triggered themselves
    assert starting() == ["reduce#0", "reduce#1"]


class Deferred(Endpoint):
    """Worker work completes when the test says so (``finish``), on the "main thread"."""

    def __init__(self) -> None:
        super().__init__()
        self.work: list[tuple[Any, tuple, Future]] = []

    def run_in_worker(self, fn: Any, *args: Any, name: str = "worker") -> Future:
        future: Future = Future()
        self.work.append((fn, args, future))
        return future

    def on_main_thread(self, future: Future, callback: Any) -> None:
        future.add_done_callback(lambda done: callback(
            None if done.exception() else done.result(), done.exception()))

    def finish(self) -> None:
        work, self.work = self.work, []
        for fn, args, future in work:
            try:
                future.set_result(fn(*args))
            except Exception as error:
                future.set_exception(error)


def elsewhere(tmp_path: Path, checkpoint_id: int, subtask: str) -> Any:
    """A snapshot written on another machine: its handle, and its file moved out of the
    JobManager's sight (to be brought back by the stand-in fetch)."""
    storage = CheckpointStorage(tmp_path / "work" / "checkpoints")
    handle = storage.write_state("job-1", checkpoint_id, subtask, b'{"n": 1}')
    path = storage.job_folder("job-1") / handle.path
    away = tmp_path / "away" / handle.path
    away.parent.mkdir(parents=True, exist_ok=True)
    path.rename(away)
    return handle, path, away


def remote_checkpoints(tmp_path: Path, endpoint: Endpoint, monkeypatch: Any,
                       fetched: list) -> tuple[JobCheckpoints, list, list]:
    """A driver whose checkpoint folder is under ``work``; fetches move the file back."""
    def fetch(paths: list[str], source: Any, root: str) -> None:
        fetched.append((paths, source, root))
        for path in paths:
            away = tmp_path / "away" / Path(path).relative_to(
                Path(root) / "checkpoints" / "job-1")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            away.rename(path)
    monkeypatch.setattr("clusterdeck.core.jobmanager.checkpoints.fetch_unseen", fetch)
    told, failed = [], []
    driver = JobCheckpoints("job-1", CheckpointOptions(interval=1.0),
                            CheckpointStorage(tmp_path / "work" / "checkpoints"), endpoint,
                            lambda: TASKS, lambda attempt, message: told.append(message),
                            failed.append)
    driver.start()
    return driver, told, failed


def test_a_snapshot_this_machine_cannot_see_is_fetched_before_it_counts(tmp_path, monkeypatch):
    fetched: list = []
    endpoint = Deferred()
    driver, told, _ = remote_checkpoints(tmp_path, endpoint, monkeypatch, fetched)
    endpoint.fire()
    handles = {s: elsewhere(tmp_path, 1, s) for s in ("v#0", "v#1")}
    for attempt, subtask in (("a0", "v#0"), ("a1", "v#1")):
        driver.acknowledged(p.AcknowledgeCheckpoint("job-1", attempt, subtask, 1,
                                                    handles[subtask][0]), "endpoint")
    assert driver.coordinator.in_progress == 1  # not counted while being fetched
    endpoint.finish()  # the fetches
    endpoint.finish()  # the completed checkpoint's metadata written
    assert [paths for paths, _, _ in fetched] == [[str(handles[s][1])] for s in handles]
    assert {source for _, source, _ in fetched} == {"endpoint"}
    assert {root for _, _, root in fetched} == {str(tmp_path / "work")}
    assert [type(m).__name__ for m in told[2:]] == ["NotifyCheckpointComplete"] * 2
    named, path = driver.snapshot_file("v#1", 1)
    assert (named, path) == (handles["v#1"][0].path, handles["v#1"][1]) and path.is_file()


def test_a_snapshot_that_cannot_be_fetched_declines_the_checkpoint(tmp_path, monkeypatch):
    def unreachable(paths: list[str], source: Any, root: str) -> None:
        raise ConnectionRefusedError("Connection refused")
    driver, endpoint, _, failed = checkpoints(tmp_path / "work" / "checkpoints")
    monkeypatch.setattr("clusterdeck.core.jobmanager.checkpoints.fetch_unseen", unreachable)
    endpoint.fire()
    handle, _, _ = elsewhere(tmp_path, 1, "v#1")
    driver.acknowledged(p.AcknowledgeCheckpoint("job-1", "a1", "v#1", 1, handle), None)
    assert driver.coordinator.in_progress is None
    assert len(failed) == 1 and ("v#1 declined: its snapshot could not be fetched from its "
                                 "TaskManager: Connection refused") in failed[0]


def test_a_task_finishing_while_its_snapshot_is_fetched_still_counts(tmp_path, monkeypatch):
    endpoint = Deferred()
    driver, told, failed = remote_checkpoints(tmp_path, endpoint, monkeypatch, [])
    endpoint.fire()
    storage = CheckpointStorage(tmp_path / "work" / "checkpoints")
    driver.acknowledged(p.AcknowledgeCheckpoint("job-1", "a0", "v#0", 1, storage.write_state(
        "job-1", 1, "v#0", b"{}")))
    handle, _, _ = elsewhere(tmp_path, 1, "v#1")
    driver.acknowledged(p.AcknowledgeCheckpoint("job-1", "a1", "v#1", 1, handle), "endpoint")
    driver.task_finished("v#1", "a1")  # its FINISHED came before the fetch ended
    assert driver.coordinator.in_progress == 1
    endpoint.finish()
    endpoint.finish()
    assert failed == [] and driver.coordinator.completed_count == 1
    assert [type(m).__name__ for m in told[2:]] == ["NotifyCheckpointComplete"] * 2


def test_an_acknowledgement_of_a_snapshot_over_the_limit_fails_the_checkpoint(tmp_path):
    driver, endpoint, _, failed = checkpoints(tmp_path)
    endpoint.fire()
    huge = StateHandle("chk-1/v%231.state", 2 ** 40, "0" * 64)
    driver.acknowledged(p.AcknowledgeCheckpoint("job-1", "a1", "v#1", 1, huge))
    assert driver.coordinator.in_progress is None
    assert len(failed) == 1 and "over the limit" in failed[0]


def test_an_acknowledgement_naming_another_subtasks_shared_file_fails_the_checkpoint(
        tmp_path):
    driver, endpoint, _, failed = checkpoints(tmp_path)
    endpoint.fire()
    own = CheckpointStorage(tmp_path).write_state("job-1", 1, "v#1", b"{}")
    theirs = SharedStateFile("shared/v%230/1-0123456789ab.delta", 10, "0" * 64)
    driver.acknowledged(p.AcknowledgeCheckpoint(
        "job-1", "a1", "v#1", 1, StateHandle(own.path, own.size, own.sha256, (theirs,))))
    assert driver.coordinator.in_progress is None
    assert len(failed) == 1 and "is not a file of v#1" in failed[0]


def test_a_restore_asks_only_for_the_shared_files_its_checkpoint_names(tmp_path):
    driver, endpoint, _, _ = checkpoints(tmp_path)
    endpoint.fire()
    storage = CheckpointStorage(tmp_path)
    delta = SharedStateFile("shared/v%231/1-0123456789ab.delta", 3, "0" * 64)
    (tmp_path / "job-1" / "shared" / "v%231").mkdir(parents=True)
    (tmp_path / "job-1" / delta.path).write_bytes(b"abc")
    for attempt, subtask in (("a0", "v#0"), ("a1", "v#1")):
        own = storage.write_state("job-1", 1, subtask, b"{}")
        driver.acknowledged(p.AcknowledgeCheckpoint("job-1", attempt, subtask, 1, StateHandle(
            own.path, own.size, own.sha256, (delta,) if subtask == "v#1" else ())))
    assert driver.snapshot_file("v#1", 1, delta.path) == (delta.path,
                                                          tmp_path / "job-1" / delta.path)
    with pytest.raises(ValueError, match="names no"):
        driver.snapshot_file("v#0", 1, delta.path)


class ThreadedEndpoint(Endpoint):
    """Worker work on threads of its own, as the JobMaster's endpoint runs it; its
    outcome is handed back whenever it ends."""

    def run_in_worker(self, fn: Any, *args: Any, name: str = "worker") -> Future:
        future: Future = Future()

        def work() -> None:
            try:
                future.set_result(fn(*args))
            except Exception as error:
                future.set_exception(error)
        threading.Thread(target=work, daemon=True).start()
        return future

    def on_main_thread(self, future: Future, callback: Any) -> None:
        future.add_done_callback(lambda f: callback(
            None if f.exception() else f.result(), f.exception()))


class SlowFirstCommit(CheckpointStorage):
    """Checkpoint 1's metadata is written late, as on a loaded machine."""

    def commit(self, checkpoint: Any) -> None:
        if checkpoint.checkpoint_id == 1:
            time.sleep(0.5)
        super().commit(checkpoint)


def test_a_checkpoint_subsumed_at_once_is_deleted_only_after_its_own_commit(tmp_path):
    """Checkpoint 2 completes while 1's metadata is still being written: 1 is deleted
    after its commit (which would otherwise fail into a folder gone, failing the job),
    and 2's metadata is on disk before then."""
    endpoint, told, failed = ThreadedEndpoint(), [], []
    storage = SlowFirstCommit(tmp_path)
    driver = JobCheckpoints("job-1", CheckpointOptions(interval=1.0, retained=1), storage,
                            endpoint, lambda: TASKS,
                            lambda attempt, message: told.append((attempt, message)),
                            failed.append)
    driver.start()
    for checkpoint_id in (1, 2):
        endpoint.fire()
        for attempt, subtask in (("a0", "v#0"), ("a1", "v#1")):
            state = storage.write_state("job-1", checkpoint_id, subtask, b"{}")
            driver.acknowledged(p.AcknowledgeCheckpoint("job-1", attempt, subtask,
                                                        checkpoint_id, state))
    wait_for(lambda: len([m for _, m in told if isinstance(m, p.NotifyCheckpointComplete)])
             == 4 and not (tmp_path / "job-1" / "chk-1").exists(), 10,
             "both committed, the first deleted")
    assert failed == []
    assert [c.checkpoint_id for c in storage.completed("job-1")[0]] == [2]
