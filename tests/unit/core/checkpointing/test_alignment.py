"""Barrier alignment at a task with several inputs: when the snapshot is due, which
channels wait, and what aborts a checkpoint there."""

from __future__ import annotations

import pytest

from clusterdeck.core.checkpointing.alignment import (
    AbortCheckpoint,
    BarrierAligner,
    BarrierTracker,
    TakeSnapshot,
    barrier_handler,
)
from clusterdeck.core.protocol.checkpoints import CheckpointingMode

EXACTLY, AT_LEAST = CheckpointingMode.EXACTLY_ONCE, CheckpointingMode.AT_LEAST_ONCE


def test_exactly_once_blocks_each_channel_from_its_barrier_until_all_came():
    aligner = BarrierAligner(3)
    assert aligner.on_barrier(0, 1, now=10.0) == []
    assert aligner.blocked(0) and not aligner.blocked(1) and aligner.aligning == 1
    assert aligner.on_barrier(2, 1, now=10.5) == []
    assert aligner.on_barrier(1, 1, now=11.0) == [TakeSnapshot(1, 1.0)]
    assert not any(aligner.blocked(c) for c in range(3)) and aligner.aligning is None


def test_at_least_once_blocks_nothing_and_snapshots_at_the_last_barrier():
    aligner = BarrierTracker(2)
    assert aligner.on_barrier(1, 4, now=1.0) == [] and not aligner.blocked(1)
    assert aligner.on_barrier(0, 4, now=1.25) == [TakeSnapshot(4, 0.25)]


def test_one_channel_snapshots_at_once():
    assert BarrierAligner(1).on_barrier(0, 1, now=5.0) == [TakeSnapshot(1, 0.0)]


def test_a_newer_barrier_before_alignment_aborts_the_older_checkpoint():
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, 1, now=0.0)
    assert aligner.on_barrier(1, 2, now=1.0) == [
        AbortCheckpoint(1, "barrier 2 arrived before checkpoint 1 was aligned")]
    assert aligner.blocked(1) and not aligner.blocked(0)
    assert aligner.on_barrier(0, 1, now=1.5) == []  # the late barrier of the aborted one
    assert aligner.on_barrier(0, 2, now=2.0) == [TakeSnapshot(2, 1.0)]


def test_barriers_of_done_checkpoints_are_ignored():
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, 3, now=0.0)
    aligner.on_barrier(1, 3, now=0.0)
    assert aligner.on_barrier(0, 3, now=1.0) == [] and aligner.on_barrier(1, 2, now=1.0) == []
    assert not aligner.blocked(0)


def test_an_ended_channel_counts_as_aligned():
    aligner = BarrierAligner(3)
    aligner.on_barrier(0, 1, now=0.0)
    aligner.on_barrier(1, 1, now=0.0)
    assert aligner.on_end_of_input(2, now=0.5) == [TakeSnapshot(1, 0.5)]
    assert aligner.on_barrier(0, 2, now=1.0) == []
    assert aligner.on_barrier(1, 2, now=1.0) == [TakeSnapshot(2, 0.0)]
    with pytest.raises(ValueError, match="channel 2 is not an open input"):
        aligner.on_barrier(2, 3, now=2.0)


def test_a_cancel_marker_aborts_the_checkpoint_and_unblocks():
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, 1, now=0.0)
    assert aligner.on_cancel(1, 1) == [AbortCheckpoint(1, "cancelled upstream")]
    assert not aligner.blocked(0)
    assert aligner.on_barrier(1, 1, now=1.0) == []  # its remaining barriers are ignored
    assert aligner.on_cancel(0, 1) == []


def test_a_cancel_of_a_newer_checkpoint_aborts_the_one_aligning_too():
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, 1, now=0.0)
    assert aligner.on_cancel(1, 2) == [
        AbortCheckpoint(1, "checkpoint 2 was cancelled before checkpoint 1 was aligned"),
        AbortCheckpoint(2, "cancelled upstream")]
    assert aligner.on_barrier(0, 2, now=1.0) == [] and aligner.on_barrier(0, 3, now=1.0) == []
    assert aligner.on_barrier(1, 3, now=1.5) == [TakeSnapshot(3, 0.5)]


def test_the_mode_picks_the_handler():
    assert isinstance(barrier_handler(2, EXACTLY), BarrierAligner)
    assert isinstance(barrier_handler(2, AT_LEAST), BarrierTracker)


def test_at_least_once_tracks_checkpoints_overlapping_across_a_fast_and_a_slow_channel():
    tracker = BarrierTracker(2)
    assert tracker.on_barrier(0, 1, now=0.0) == []
    assert tracker.on_barrier(0, 2, now=1.0) == []  # the fast channel is a checkpoint ahead
    assert tracker.on_barrier(1, 1, now=1.5) == [TakeSnapshot(1, 1.5)]
    assert tracker.on_barrier(1, 2, now=2.0) == [TakeSnapshot(2, 1.0)]


def test_at_least_once_a_completed_checkpoint_subsumes_older_open_ones():
    tracker = BarrierTracker(2)
    tracker.on_barrier(0, 1, now=0.0)  # channel 1's barrier 1 was lost with a cancel
    tracker.on_barrier(0, 2, now=1.0)
    assert tracker.on_barrier(1, 2, now=2.0) == [AbortCheckpoint(1, "subsumed by checkpoint 2"),
                                                  TakeSnapshot(2, 1.0)]
    assert tracker.on_barrier(1, 1, now=3.0) == []


def test_at_least_once_keeps_a_bounded_number_of_open_checkpoints():
    from clusterdeck.core.checkpointing.alignment import TRACKED
    tracker = BarrierTracker(2)
    aborted = []
    for checkpoint_id in range(1, TRACKED + 3):
        aborted += tracker.on_barrier(0, checkpoint_id, now=float(checkpoint_id))
    assert [a.checkpoint_id for a in aborted] == [1, 2]
    assert tracker.on_cancel(1, 3) == [AbortCheckpoint(3, "cancelled upstream")]
    newest = TRACKED + 2  # channel 1 ended: every open checkpoint is complete, the newest wins
    assert tracker.on_end_of_input(1, now=100.0)[-1] == TakeSnapshot(newest, 100.0 - newest)
