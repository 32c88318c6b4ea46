"""What goes wrong on a channel, as the task that uses it sees it.

Every failure of the data plane ends as a ChannelError raised by ``emit`` (producer) or
``poll`` (consumer), never as silence or a hang: the task turns it into its attempt's
failure cause, so the message names the partition, the subpartition and the peer.
"""

from __future__ import annotations


class ChannelError(Exception):
    """A channel failed: its connection was lost, its peer refused it or broke the
    protocol, or its partition was released. The task fails with this as its cause.
    ``unreachable``: the producer's TaskManager, when nothing it served could be reached
    within the connect timeout (the job blocks it: core/jobmanager/blocklist.py)."""

    def __init__(self, *args: object, unreachable: tuple[str, ...] = ()) -> None:
        super().__init__(*args)
        self.unreachable = unreachable


class ChannelTimeout(ChannelError):
    """``emit`` waited ``timeout`` seconds for room in a subpartition: its consumer took
    nothing for that long (backpressure that did not end)."""


class ChannelCancelled(ChannelError):
    """The task was cancelled while ``emit`` waited for room: not a failure of the
    channel, the task is going away."""
