"""Savepoints: the coordinator takes one on request (at once, or after the checkpoint in
progress), copies it out before it completes, and answers whoever asked whatever happens;
on disk a savepoint is a whole folder or nothing, and a job starts only from one of its
own cluster that fits it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from clusterdeck.core.checkpointing import (
    CheckpointCoordinator,
    CheckpointOptions,
    CheckpointStorage,
    CheckpointStorageError,
    CheckpointTask,
    CompletedCheckpoint,
    Savepoints,
    SubtaskAck,
)
from clusterdeck.core.checkpointing.instructions import (
    CheckpointAborted,
    CheckpointCompleted,
    SavepointDone,
    TriggerCheckpoint,
    WriteSavepoint,
)
from clusterdeck.core.checkpointing.savepoints import (
    fitting_states,
    recorded_parallelism,
    rescale_checkpoint,
)
from clusterdeck.core.protocol.checkpoints import SavepointRestore
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind, JobVertex, OperatorSpec

TASKS = (CheckpointTask("v1#0", "a0", source=True), CheckpointTask("v1#1", "a1", source=True))


def coordinator(**options) -> CheckpointCoordinator:
    return CheckpointCoordinator("job-1", CheckpointOptions(**{"interval": 10.0, **options}),
                                 now=100.0)


def acknowledge_all(c: CheckpointCoordinator, checkpoint_id: int, now: float) -> list:
    out: list = []
    for task in TASKS:
        out += c.acknowledge(checkpoint_id, task.subtask_id, task.attempt_id, SubtaskAck(), now)
    return out


def test_a_requested_savepoint_is_due_at_once_and_its_trigger_says_stop():
    c = coordinator()
    c.request_savepoint(stop=True)
    assert c.next_trigger() <= 100.0
    out = c.trigger(101.0, TASKS)
    assert out == [TriggerCheckpoint(1, 101.0, c.options.mode, ("a0", "a1"), stop=True)]


def test_a_savepoint_waits_for_the_checkpoint_in_progress():
    c = coordinator()
    c.trigger(110.0, TASKS)
    c.request_savepoint(stop=False)
    assert c.next_trigger() is None  # one at a time
    acknowledge_all(c, 1, 111.0)
    assert c.next_trigger() == 111.0
    assert c.trigger(111.0, TASKS)[0].checkpoint_id == 2


def test_a_second_request_is_refused_while_one_is_wanted_or_in_progress():
    c = coordinator()
    c.request_savepoint(stop=False)
    with pytest.raises(ValueError, match="already in progress"):
        c.request_savepoint(stop=True)
    c.trigger(101.0, TASKS)
    with pytest.raises(ValueError, match="already in progress"):
        c.request_savepoint(stop=False)


def test_a_savepoint_completes_only_once_written_and_then_answers_with_its_path():
    c = coordinator()
    c.request_savepoint(stop=False)
    c.trigger(101.0, TASKS)
    out = acknowledge_all(c, 1, 102.0)
    assert [type(i) for i in out] == [WriteSavepoint] and c.latest() is None
    assert c.expire(10_000.0) == []  # being written: not timed out meanwhile
    done = c.savepoint_written(1, "/sp/savepoint-1", 103.0)
    assert [type(i) for i in done] == [CheckpointCompleted, SavepointDone]
    assert done[-1] == SavepointDone(1, "/sp/savepoint-1")
    assert c.latest().checkpoint_id == 1


def test_a_savepoint_that_cannot_be_written_aborts_the_checkpoint_uncounted():
    c = coordinator(tolerable_failures=0)
    c.request_savepoint(stop=True)
    c.trigger(101.0, TASKS)
    acknowledge_all(c, 1, 102.0)
    out = c.savepoint_not_written(1, "disk full", 103.0)
    assert [type(i) for i in out] == [CheckpointAborted, SavepointDone]
    assert "disk full" in out[-1].error and c.latest() is None
    assert not any(type(i).__name__ == "FailJob" for i in out)  # not the job's failure


def test_a_declined_savepoint_answers_with_the_reason_and_does_not_fail_the_job():
    c = coordinator(tolerable_failures=0)
    c.request_savepoint(stop=False)
    c.trigger(101.0, TASKS)
    out = c.decline(1, "v1#0", "a0", "disk full", 102.0)
    assert out[-1] == SavepointDone(1, error="v1#0 declined: disk full")
    assert not any(type(i).__name__ == "FailJob" for i in out)


def test_a_savepoint_wanted_while_a_task_is_not_running_fails_at_once():
    c = coordinator()
    c.request_savepoint(stop=True)
    out = c.trigger(101.0, (TASKS[0], CheckpointTask("v1#1", "a1", source=True, running=False)))
    assert out[-1].error == "no savepoint taken: not every task is running (v1#1 not)"
    assert c.next_trigger() == 111.0  # checkpoints go on as before


def test_a_stop_without_savepoint_completes_as_a_checkpoint_and_answers_without_a_path():
    c = coordinator()
    c.request_savepoint(stop=True, savepoint=False)
    c.trigger(101.0, TASKS)
    out = acknowledge_all(c, 1, 102.0)
    assert [type(i) for i in out] == [CheckpointCompleted, SavepointDone]
    assert out[-1] == SavepointDone(1)


# -- on disk ----------------------------------------------------------------------------


def graph(parallelism: int = 2, vertex_id: str = "v1") -> JobGraph:
    vertex = JobVertex(vertex_id, "rate -> write", parallelism,
                       (OperatorSpec("op1", "source.rate", {"rate": 10.0, "count": None}),))
    return JobGraph("streaming", JobKind.STREAMING, (vertex,))


def completed(tmp_path: Path, checkpoint_id: int = 3) -> tuple[CheckpointStorage,
                                                                CompletedCheckpoint]:
    storage = CheckpointStorage(tmp_path / "checkpoints")
    states = {subtask: storage.write_state("job-1", checkpoint_id, subtask,
                                           json.dumps({"source": index}).encode())
              for index, subtask in enumerate(("v1#0", "v1#1"))}
    checkpoint = CompletedCheckpoint("job-1", checkpoint_id, 10.0, 11.0, states)
    storage.commit(checkpoint)
    return storage, checkpoint


def test_a_savepoint_holds_copies_of_its_states_and_outlives_the_job_checkpoints(tmp_path):
    storage, checkpoint = completed(tmp_path)
    savepoints = Savepoints(tmp_path / "savepoints")
    path = savepoints.write(checkpoint, storage, graph())
    storage.discard("job-1", [3])
    metadata = savepoints.read(str(path))
    assert (metadata.checkpoint_id, metadata.parallelism) == (3, {"v1": 2})
    assert sorted(p.name for p in path.iterdir()) == ["_metadata", "v1%230.state",
                                                      "v1%231.state"]
    assert [p.name for p in (tmp_path / "savepoints").iterdir()] == [path.name]  # no leftovers


def test_a_new_job_adopts_a_savepoint_as_its_first_completed_checkpoint(tmp_path):
    storage, checkpoint = completed(tmp_path)
    savepoints = Savepoints(tmp_path / "savepoints")
    path = savepoints.write(checkpoint, storage, graph())
    job = CheckpointStorage(tmp_path / "job-2")
    adopted = savepoints.adopt(SavepointRestore(path.name), graph(), "job-2", job)
    found, _ = job.completed("job-2")
    assert found == [adopted] and adopted.checkpoint_id == 3
    assert json.loads(job.read_state("job-2", adopted.states["v1#1"])) == {"source": 1}


def test_a_job_at_another_parallelism_gets_every_old_state_in_each_new_subtask(tmp_path):
    storage, checkpoint = completed(tmp_path)
    savepoints = Savepoints(tmp_path / "savepoints")
    path = savepoints.write(checkpoint, storage, graph())
    job = CheckpointStorage(tmp_path / "job-2")
    adopted = savepoints.adopt(SavepointRestore(path.name), graph(parallelism=3), "job-2", job)
    assert sorted(adopted.states) == ["v1#0", "v1#1", "v1#2"]
    for handle in adopted.states.values():
        assert json.loads(job.read_state("job-2", handle)) == {"rescaled": {
            "max_parallelism": 128,
            "parts": [{"subtask": 0, "state": {"source": 0}, "shared": []},
                      {"subtask": 1, "state": {"source": 1}, "shared": []}]}}


def test_a_savepoint_of_a_format_this_version_does_not_read_names_both(tmp_path):
    storage, checkpoint = completed(tmp_path)
    savepoints = Savepoints(tmp_path / "savepoints")
    path = savepoints.write(checkpoint, storage, graph())
    metadata = json.loads((path / "_metadata").read_text())
    (path / "_metadata").write_text(json.dumps({**metadata, "format": 3}))
    with pytest.raises(CheckpointStorageError, match="of format 3; this version reads "
                                                     "formats 1, 2"):
        savepoints.read(path.name)


def test_a_savepoint_path_outside_the_savepoint_folder_is_refused(tmp_path):
    savepoints = Savepoints(tmp_path / "savepoints")
    (tmp_path / "savepoints").mkdir()
    for path in ("/etc", "../checkpoints", str(tmp_path), "savepoint-x/../../etc",
                 "not-a-savepoint"):
        with pytest.raises(CheckpointStorageError, match="is not a savepoint of this cluster"):
            savepoints.read(path)


def test_a_savepoint_with_changed_state_is_refused_on_adoption(tmp_path):
    storage, checkpoint = completed(tmp_path)
    savepoints = Savepoints(tmp_path / "savepoints")
    path = savepoints.write(checkpoint, storage, graph())
    (path / "v1%231.state").write_bytes(b'{"source": 99}')
    with pytest.raises(CheckpointStorageError, match="not what was written"):
        savepoints.adopt(SavepointRestore(str(path)), graph(), "job-2",
                         CheckpointStorage(tmp_path / "job-2"))


def test_malformed_savepoint_metadata_is_a_clear_error(tmp_path):
    folder = tmp_path / "savepoints" / "savepoint-job-1-3-abcdef"
    folder.mkdir(parents=True)
    (folder / "_metadata").write_text('{"format": 1, "job_id": 5}')
    with pytest.raises(CheckpointStorageError, match="metadata is not valid"):
        Savepoints(tmp_path / "savepoints").read(folder.name)


def test_a_job_must_fit_the_savepoint_it_starts_from(tmp_path):
    storage, checkpoint = completed(tmp_path)
    savepoints = Savepoints(tmp_path / "savepoints")
    metadata = savepoints.read(str(savepoints.write(checkpoint, storage, graph())))
    assert set(fitting_states(metadata, graph(), False)) == {"v1#0", "v1#1"}
    assert set(fitting_states(metadata, graph(parallelism=3), False)) == {"v1#0", "v1#1"}
    with pytest.raises(ValueError, match=r"max parallelism of 128 .* and this one 64"):
        fitting_states(metadata, replace(graph(), max_parallelism=64), False)
    with pytest.raises(ValueError, match="cannot have 200 subtasks"):
        fitting_states(metadata, graph(parallelism=200), False)
    with pytest.raises(ValueError, match="--allow-non-restored-state"):
        fitting_states(metadata, graph(vertex_id="v9"), False)
    assert fitting_states(metadata, graph(vertex_id="v9"), True) == {}


def test_reactive_mode_redistributes_the_latest_checkpoint_into_the_next_number(tmp_path):
    """The old checkpoint stays whole beside the new one: a crash between them restores
    from either, never from a mix."""
    storage, checkpoint = completed(tmp_path)
    rescaled = rescale_checkpoint(storage, "job-1", graph(), graph(parallelism=3))
    found, _ = storage.completed("job-1")
    assert found == [checkpoint, rescaled] and rescaled.checkpoint_id == 4
    assert sorted(rescaled.states) == ["v1#0", "v1#1", "v1#2"]
    assert json.loads(storage.read_state("job-1", rescaled.states["v1#2"]))["rescaled"][
        "parts"][1] == {"subtask": 1, "state": {"source": 1}, "shared": []}
    assert json.loads(storage.read_state("job-1", checkpoint.states["v1#1"])) == {"source": 1}


def test_a_job_without_a_completed_checkpoint_rescales_from_the_start(tmp_path):
    storage = CheckpointStorage(tmp_path / "checkpoints")
    assert rescale_checkpoint(storage, "job-1", graph(), graph(parallelism=3)) is None


def test_a_job_recovered_between_rescale_and_record_goes_on_as_its_checkpoint_is_laid_out(
        tmp_path):
    """The JobManager died after the redistributed checkpoint was committed and before
    the job's new parallelism was stored: the checkpoint says which it is."""
    storage, _ = completed(tmp_path)
    assert recorded_parallelism(storage, "job-1", graph()) == graph()  # no rescale
    rescaled = rescale_checkpoint(storage, "job-1", graph(), graph(parallelism=3))
    assert rescaled.parallelism == {"v1": 3}
    assert recorded_parallelism(storage, "job-1", graph()) == graph(parallelism=3)
    assert recorded_parallelism(storage, "job-1", graph(3)) == graph(3)  # stored in time
