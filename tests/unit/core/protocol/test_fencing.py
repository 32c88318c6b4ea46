"""Fencing tokens that carry an epoch, and the fence of receivers (core/protocol/fencing.py)."""

from __future__ import annotations

import logging

import pytest

from clusterdeck.core.protocol.fencing import EpochFence, epoch_of, fencing_token


def test_a_token_carries_its_epoch_and_two_tokens_of_one_epoch_differ() -> None:
    assert epoch_of(fencing_token(7)) == 7
    assert fencing_token(0) != fencing_token(0)
    with pytest.raises(ValueError):
        fencing_token(-1)


@pytest.mark.parametrize("token", ["", "token-1", "7:xyz", "-1:" + "a" * 32,
                                   "9" * 19 + ":" + "a" * 32, "7:" + "a" * 32 + "\n"])
def test_a_token_that_is_not_ours_counts_as_the_lowest_epoch(token: str) -> None:
    assert epoch_of(token) == 0


def test_the_fence_admits_the_same_and_newer_epochs_and_refuses_older_ones_with_a_cause(
        caplog: pytest.LogCaptureFixture) -> None:
    fence = EpochFence("TaskManager")
    assert fence.admit(fencing_token(2), "a leader record") is None
    assert fence.admit(fencing_token(2), "a deployment") is None
    assert fence.admit(fencing_token(5), "a deployment") is None
    with caplog.at_level(logging.WARNING):
        cause = fence.admit(fencing_token(4), "the deployment of a-1")
    assert cause == ("the deployment of a-1 refused: it comes from a JobManager of epoch 4, "
                     "older than the leader of epoch 5 this TaskManager follows")
    assert cause in caplog.text and fence.highest == 5
