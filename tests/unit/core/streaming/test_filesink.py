"""The two-phase file sink: output appears only with a completed checkpoint, and a
restore leaves exactly the output of the checkpoint it restores, whatever was lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.streaming.filesink import PendingFile, SinkState, TwoPhaseFileSink


def output(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.name.startswith("part-")}


def test_nothing_is_visible_until_its_checkpoint_completed(tmp_path: Path) -> None:
    sink = TwoPhaseFileSink(tmp_path, subtask=0)
    sink.write(["a", "b"])
    assert output(tmp_path) == {}
    state = sink.snapshot(1)
    assert state == SinkState(0, 1, (PendingFile(1, ".part-0-0.a0.pending-1"),))
    sink.write(["c"])
    assert output(tmp_path) == {}
    sink.committed(1)
    assert output(tmp_path) == {"part-0-0": "a\nb\n"}
    sink.committed(1)  # told twice
    assert output(tmp_path) == {"part-0-0": "a\nb\n"}


def test_an_aborted_checkpoints_files_wait_for_the_next_one_that_completes(tmp_path: Path):
    sink = TwoPhaseFileSink(tmp_path, subtask=2)
    sink.write(["a"])
    sink.snapshot(1)  # checkpoint 1 is aborted: never committed
    sink.write(["b"])
    state = sink.snapshot(2)
    assert [p.checkpoint_id for p in state.pending] == [1, 2]
    sink.committed(2)
    assert output(tmp_path) == {"part-2-0": "a\n", "part-2-1": "b\n"}
    assert sink.snapshot(3) == SinkState(2, 2, ())  # nothing written since: no file


def test_a_restore_keeps_the_checkpoints_output_and_drops_what_came_after(tmp_path: Path):
    sink = TwoPhaseFileSink(tmp_path, subtask=0)
    sink.write(["a"])
    state = sink.snapshot(1)  # checkpoint 1 completes, but its notice is lost: a crash
    sink.write(["b"])
    sink.snapshot(2)          # checkpoint 2 never completes
    sink.write(["c"])         # in progress when the TaskManager died
    other = TwoPhaseFileSink(tmp_path, subtask=1)  # another subtask's work is not touched
    other.write(["x"])
    restored = TwoPhaseFileSink.restore(tmp_path, state)
    assert output(tmp_path) == {"part-0-0": "a\n"}
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".part-1-0.a0.inprogress", "part-0-0"]
    restored.write(["b again"])
    restored.committed(restored.snapshot(2).pending[-1].checkpoint_id)
    assert output(tmp_path) == {"part-0-0": "a\n", "part-0-1": "b again\n"}


def test_restoring_twice_from_one_checkpoint_gives_the_same_output(tmp_path: Path) -> None:
    sink = TwoPhaseFileSink(tmp_path, subtask=0)
    sink.write(["a"])
    state = sink.snapshot(4)
    TwoPhaseFileSink.restore(tmp_path, state).write(["lost"])
    TwoPhaseFileSink.restore(tmp_path, state)
    assert output(tmp_path) == {"part-0-0": "a\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-0-0"]


def test_a_pending_file_that_vanished_is_an_error_not_silent_loss(tmp_path: Path) -> None:
    sink = TwoPhaseFileSink(tmp_path, subtask=0)
    sink.write(["a"])
    state = sink.snapshot(1)
    (tmp_path / state.pending[0].name).unlink()
    with pytest.raises(FileNotFoundError, match=r"pending sink file \.part-0-0\.a0\.pending-1"):
        sink.committed(1)


def test_a_replaced_attempt_still_running_never_writes_into_the_new_ones_files(tmp_path):
    """An attempt whose TaskManager still runs it after the JobManager replaced it writes
    its own files; the new attempt's restore deletes them, and they are never committed."""
    old = TwoPhaseFileSink(tmp_path, subtask=0, attempt="a0")
    old.write(["a"])
    state = old.snapshot(1)
    old.committed(1)
    new = TwoPhaseFileSink.restore(tmp_path, state, attempt="e1a0")
    old.write(["zombie"])  # after the restore: a file of its own, same number
    new.write(["b"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".part-0-1.a0.inprogress", ".part-0-1.e1a0.inprogress", "part-0-0"]
    new.committed(new.snapshot(2).pending[-1].checkpoint_id)
    assert output(tmp_path) == {"part-0-0": "a\n", "part-0-1": "b\n"}
    TwoPhaseFileSink.restore(tmp_path, new.snapshot(3), attempt="e2a0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-0-0", "part-0-1"]


def test_an_attempt_name_that_is_not_a_file_name_part_is_refused(tmp_path):
    with pytest.raises(ValueError, match="cannot be part of a file name"):
        TwoPhaseFileSink(tmp_path, subtask=0, attempt="../x")


def test_a_replaced_attempt_restoring_late_never_deletes_a_later_attempts_files(tmp_path):
    """Deployed just before its TaskManager was cut off, a replaced attempt restores only
    after the heal, from the checkpoint it was deployed with: the attempt that replaced it
    (a later attempt in its epoch, or one of a later epoch) keeps its files in progress
    and pending, and its commit finds them."""
    first = TwoPhaseFileSink(tmp_path, subtask=0, attempt="a0")
    first.write(["a"])
    state = first.snapshot(1)
    current = TwoPhaseFileSink.restore(tmp_path, state, attempt="a2")
    current.write(["b"])
    current.snapshot(2)
    current.write(["c"])
    TwoPhaseFileSink.restore(tmp_path, state, attempt="a1").write(["zombie"])
    current.committed(2)
    assert output(tmp_path) == {"part-0-0": "a\n", "part-0-1": "b\n"}
    later_epoch = TwoPhaseFileSink.restore(tmp_path, current.snapshot(3), attempt="e1a0")
    later_epoch.write(["d"])
    later_epoch.snapshot(4)
    TwoPhaseFileSink.restore(tmp_path, state, attempt="a7")  # an earlier epoch's
    later_epoch.committed(4)
    assert output(tmp_path) == {"part-0-0": "a\n", "part-0-1": "b\n", "part-0-2": "c\n",
                                "part-0-3": "d\n"}
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # zombie's gone
