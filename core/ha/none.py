"""``ha.mode = none``: no election. The one JobManager holds the cluster's lock
(core/node/clusterlock.py) and leads at epoch 0, as before high availability existed."""

from __future__ import annotations

import threading

from clusterdeck.core.ha.election import Leadership


class NoElection:
    mode = "none"

    def run_for_leadership(self, lost: threading.Event) -> Leadership:
        return Leadership(0, lost)

    def standbys(self) -> tuple[str, ...]:
        return ()

    def close(self) -> None:
        """Nothing to let go: the cluster's lock is the JobManager's own business."""
