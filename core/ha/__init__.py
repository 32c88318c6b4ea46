"""High availability: which JobManager leads, with what epoch (docs/ha.md).

One driver per ``ha.mode``: ``none`` (one JobManager, epoch 0), ``local`` (standbys on one
machine wait on a lock file), ``zookeeper`` (election through ZooKeeper); and the local
ZooKeeper server ``clusterdeck up --ha zookeeper`` runs when no quorum is given
(``zkserver.py``).
"""

from __future__ import annotations

from pathlib import Path

from clusterdeck.core.config.settings import Config, ConfigError
from clusterdeck.core.ha.election import LeaderElection, Leadership
from clusterdeck.core.ha.local import LocalElection
from clusterdeck.core.ha.none import NoElection

__all__ = ["LeaderElection", "Leadership", "election_for", "storage_dir"]


def storage_dir(config: Config, cluster_dir: Path) -> Path:
    """Where every JobManager of the cluster finds the job store: ``ha.storage-dir``, or
    the cluster's data folder."""
    return Path(config["ha.storage-dir"]).expanduser() if config["ha.storage-dir"] \
        else Path(cluster_dir)


def election_for(config: Config, cluster_dir: Path) -> LeaderElection:
    mode = config["ha.mode"]
    storage = storage_dir(config, cluster_dir)
    if mode == "local":
        return LocalElection(storage)
    if mode == "zookeeper":
        if not config["ha.zookeeper.quorum"]:
            raise ConfigError("ha.mode = zookeeper needs ha.zookeeper.quorum (host:port,...) "
                              "unless clusterdeck up runs a ZooKeeper server of its own")
        # Here, not at the top: kazoo costs every JobManager ~40 ms to import, and only
        # this mode needs it.
        from clusterdeck.core.ha.zookeeper import ZooKeeperElection
        return ZooKeeperElection(config["cluster.id"], config["ha.zookeeper.quorum"],
                                 config["ha.zookeeper.session-timeout"], storage)
    return NoElection()
