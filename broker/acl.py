"""The one access rule every clusterdeck broker enforces.

A cluster's users may publish and subscribe under ``clusterdeck/<cluster-id>/`` and
nowhere else. Both broker kinds build their ACLs from here so the rule cannot drift
between them. The cluster id becomes a topic level, a user name and a file name, so it
is restricted to characters that are safe in all three.
"""

from __future__ import annotations

import re

TOPIC_ROOT = "clusterdeck"

_CLUSTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_cluster_id(cluster_id: str) -> str:
    """Return ``cluster_id`` when it is safe as a topic level and a user name."""
    if not isinstance(cluster_id, str) or not _CLUSTER_ID.fullmatch(cluster_id):
        raise ValueError(
            f"cluster id {cluster_id!r} must be 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit")
    return cluster_id


def cluster_topic_filter(cluster_id: str) -> str:
    """The topic filter a cluster's users are confined to."""
    return f"{TOPIC_ROOT}/{check_cluster_id(cluster_id)}/#"
