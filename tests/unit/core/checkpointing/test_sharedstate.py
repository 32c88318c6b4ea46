"""Shared files of incremental checkpoints: counted by the completed-checkpoint store, deleted
only once no retained checkpoint names them (also when a JobManager rebuilt the store
from disk), files of aborted checkpoints swept once a newer checkpoint completed without
them, and savepoints that copy every file they need and restore without the job's."""

from __future__ import annotations

import json
from pathlib import Path

from clusterdeck.core.checkpointing import (
    CheckpointStorage,
    CompletedCheckpoint,
    CompletedCheckpointStore,
    Savepoints,
)
from clusterdeck.core.checkpointing.changelog import IncrementalSnapshots, chain_entries
from clusterdeck.core.protocol.checkpoints import SavepointRestore, StateHandle
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind, JobVertex, OperatorSpec

SUBTASK = "v1#0"


def incremental_checkpoint(storage: CheckpointStorage, snapshots: IncrementalSnapshots,
                           checkpoint_id: int, changes: dict) -> CompletedCheckpoint:
    """Subtask ``v1#0`` uploads ``changes`` for ``checkpoint_id``, which completes."""
    chain = snapshots.write(checkpoint_id, changes)
    handle = storage.write_state("job-1", checkpoint_id, SUBTASK, b"{}")
    checkpoint = CompletedCheckpoint("job-1", checkpoint_id, 1.0, 2.0, {
        SUBTASK: StateHandle(handle.path, handle.size, handle.sha256, chain)})
    storage.commit(checkpoint)
    return checkpoint


def on_disk(storage: CheckpointStorage) -> set[str]:
    folder = storage.job_folder("job-1")
    return {str(path.relative_to(folder)) for path in (folder / "shared").rglob("*")
            if path.is_file()}


def retire(storage: CheckpointStorage, store: CompletedCheckpointStore,
           checkpoint: CompletedCheckpoint) -> None:
    """What the JobMaster does once a checkpoint completed."""
    subsumed = store.add(checkpoint)
    storage.discard("job-1", [c.checkpoint_id for c in subsumed], store.referenced())
    storage.sweep_shared("job-1", store.referenced(), checkpoint.checkpoint_id)


def test_a_shared_file_is_deleted_only_when_no_retained_checkpoint_names_it(tmp_path):
    storage = CheckpointStorage(tmp_path)
    snapshots = IncrementalSnapshots(storage, "job-1", SUBTASK)
    store = CompletedCheckpointStore(retained=2)
    first = incremental_checkpoint(storage, snapshots, 1, {b"a": b"1"})
    retire(storage, store, first)
    second = incremental_checkpoint(storage, snapshots, 2, {b"b": b"2"})
    retire(storage, store, second)
    (delta_1,) = [file.path for file in first.states[SUBTASK].shared]
    assert store.shared.count(delta_1) == 2
    snapshots.materialised(snapshots.build_base(snapshots.chain))   # named by the next
    third = incremental_checkpoint(storage, snapshots, 3, {b"c": b"3"})
    retire(storage, store, third)  # the first goes; the second still names delta 1
    assert delta_1 in on_disk(storage) and store.shared.count(delta_1) == 1
    fourth = incremental_checkpoint(storage, snapshots, 4, {b"d": b"4"})
    retire(storage, store, fourth)  # now only the base and its deltas are named
    assert on_disk(storage) == {file.path for c in (third, fourth)
                                for file in c.states[SUBTASK].shared}
    assert delta_1 not in on_disk(storage)
    entries = dict(chain_entries(storage, "job-1", SUBTASK, fourth.states[SUBTASK].shared))
    assert entries == {b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4"}


def test_an_aborted_checkpoints_delta_is_swept_once_a_newer_one_completed_without_it(
        tmp_path):
    storage = CheckpointStorage(tmp_path)
    snapshots = IncrementalSnapshots(storage, "job-1", SUBTASK)
    store = CompletedCheckpointStore(retained=1)
    retire(storage, store, incremental_checkpoint(storage, snapshots, 1, {b"a": b"1"}))
    (aborted,) = snapshots.write(2, {b"b": b"2"})[1:]  # checkpoint 2 never completes
    in_progress = IncrementalSnapshots(storage, "job-1", SUBTASK)
    in_progress.write(9, {b"z": b"9"})  # a checkpoint still in progress: kept
    restarted = IncrementalSnapshots(storage, "job-1", SUBTASK)
    restarted.restored(store.latest().states[SUBTASK].shared)  # a restore from checkpoint 1
    retire(storage, store, incremental_checkpoint(storage, restarted, 3, {b"c": b"3"}))
    assert aborted.path not in on_disk(storage)
    assert any(path.startswith("shared/v1%230/9-") for path in on_disk(storage))


def test_a_jobmanager_that_rebuilt_its_store_from_disk_keeps_every_file_it_names(tmp_path):
    storage = CheckpointStorage(tmp_path)
    snapshots = IncrementalSnapshots(storage, "job-1", SUBTASK)
    before = CompletedCheckpointStore(retained=2)
    for checkpoint_id in (1, 2, 3):
        retire(storage, before, incremental_checkpoint(storage, snapshots, checkpoint_id,
                                                       {bytes([checkpoint_id]): b"x"}))
    named = on_disk(storage)
    found, problems = storage.completed("job-1")
    assert problems == [] and [c.checkpoint_id for c in found] == [2, 3]
    after = CompletedCheckpointStore(retained=2, recovered=found)
    assert after.shared.referenced() == before.shared.referenced() == frozenset(named)
    storage.sweep_shared("job-1", after.referenced(), after.latest().checkpoint_id)
    assert on_disk(storage) == named


def test_a_savepoint_copies_every_shared_file_and_a_new_job_restores_from_it_alone(tmp_path):
    storage = CheckpointStorage(tmp_path / "checkpoints")
    snapshots = IncrementalSnapshots(storage, "job-1", SUBTASK)
    incremental_checkpoint(storage, snapshots, 1, {b"a": b"1", b"b": b"1"})
    checkpoint = incremental_checkpoint(storage, snapshots, 2, {b"a": None, b"c": b"2"})
    vertex = JobVertex("v1", "rate -> window", 1,
                       (OperatorSpec("op1", "source.rate", {"rate": 10.0, "count": None}),))
    graph = JobGraph("streaming", JobKind.STREAMING, (vertex,))
    savepoints = Savepoints(tmp_path / "savepoints")
    path = savepoints.write(checkpoint, storage, graph)
    storage.discard("job-1", [1, 2])
    storage.sweep_shared("job-1", (), 2)
    assert on_disk(storage) == set()
    assert sorted(p.name for p in Path(path).iterdir()) == [
        "_metadata", "v1%230.0.delta", "v1%230.1.delta", "v1%230.state"]
    job = CheckpointStorage(tmp_path / "job-2")
    adopted = savepoints.adopt(SavepointRestore(path.name), graph, "job-2", job)
    handle = adopted.states[SUBTASK]
    assert json.loads(job.read_state("job-2", handle)) == {}
    assert all(file.path.startswith("shared/v1%230/2-") for file in handle.shared)
    assert dict(chain_entries(job, "job-2", SUBTASK, handle.shared)) == {
        b"a": None, b"b": b"1", b"c": b"2"}
    found, _ = job.completed("job-2")
    assert found == [adopted]


def test_a_checkpoints_size_counts_the_shared_files_it_uploaded_not_those_named_before():
    from clusterdeck.core.checkpointing import (
        CheckpointCoordinator,
        CheckpointOptions,
        CheckpointTask,
        SubtaskAck,
    )
    from clusterdeck.core.protocol.checkpoints import SharedStateFile
    task = CheckpointTask(SUBTASK, "a0", source=True)
    coordinator = CheckpointCoordinator("job-1", CheckpointOptions(interval=1.0), now=0.0)
    old, new = (SharedStateFile(f"shared/v1%230/{n}-0123456789ab.delta", 1000 * n, "0")
                for n in (1, 2))
    for checkpoint_id, chain in ((1, (old,)), (2, (old, new))):
        coordinator.trigger(float(checkpoint_id), [task])
        coordinator.acknowledge(checkpoint_id, SUBTASK, "a0", SubtaskAck(
            StateHandle(f"chk-{checkpoint_id}/v1%230.state", 10, "0", chain)),
            checkpoint_id + 0.5)
    assert [record.size for record in coordinator.history()] == [1010, 2010]
