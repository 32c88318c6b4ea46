"""Fencing tokens that carry the leader's epoch, and the check every receiver makes.

A JobManager's fencing token is ``<epoch>:<random hex>``. The epoch is what the leader
election granted (core/ha): a counter that only grows, bumped by every new leader, so of
two JobManagers that both believe they lead (one stopped with SIGSTOP and resumed, one on
the other side of a network cut) the newer has the higher epoch. A TaskManager or client
keeps the highest epoch it has seen and refuses what comes from a lower one: the stale
leader's deployments and its retained leader record. The random part tells two runs of
the same epoch apart (``ha.mode = none``, where every epoch is 0), as before.
"""

from __future__ import annotations

import logging
import re
import uuid

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"(0|[1-9][0-9]{0,17}):[0-9a-f]{32}\Z")


def fencing_token(epoch: int) -> str:
    """A new token for a leader of ``epoch``."""
    if epoch < 0:
        raise ValueError(f"an epoch is 0 or more, got {epoch}")
    return f"{epoch}:{uuid.uuid4().hex}"


def epoch_of(token: str) -> int:
    """The epoch a token carries. One without it (not made by ``fencing_token``: received
    over the network, so it may be anything) counts as epoch 0, the lowest: it can be
    refused, never raise the epoch a receiver follows."""
    match = _TOKEN.match(token) if isinstance(token, str) else None
    return int(match.group(1)) if match else 0


class EpochFence:
    """The highest leader epoch a TaskManager or client has seen, and the refusal of
    anything older. Not thread-safe: its owner calls it on one thread (a TaskManager's
    main thread, a client's network thread)."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self.highest = -1

    def admit(self, token: str, what: str) -> str | None:
        """Remember the token's epoch and return None, or return why ``what`` (a
        deployment, a leader record) is refused; the refusal is logged."""
        epoch = epoch_of(token)
        if epoch >= self.highest:
            self.highest = epoch
            return None
        cause = (f"{what} refused: it comes from a JobManager of epoch {epoch}, older than "
                 f"the leader of epoch {self.highest} this {self._owner} follows")
        log.warning("%s", cause)
        return cause
