"""The status bar's line for a cluster event."""

from __future__ import annotations

from clusterdeck.core.protocol import messages as p
from clusterdeck.gui.controllers.statusline import cluster_event_notice


def test_a_leadership_change_is_shown_with_its_cause() -> None:
    took_over = p.LeadershipChanged(4, 4001, "host-a", "zookeeper", True,
                                    "won the zookeeper election after standing by 2.3 s")
    stepped_down = p.LeadershipChanged(3, 4000, "host-a", "zookeeper", False,
                                       "its ZooKeeper session was SUSPENDED")
    assert cluster_event_notice(took_over)[0] == (
        "JobManager pid 4001 on host-a leads (epoch 4): won the zookeeper election after "
        "standing by 2.3 s")
    assert cluster_event_notice(stepped_down)[0] == (
        "JobManager pid 4000 on host-a stopped leading (epoch 3): its ZooKeeper session was "
        "SUSPENDED")
