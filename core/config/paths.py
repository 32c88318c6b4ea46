"""Where clusterdeck keeps its files: appdirs folders, or one folder named by CLUSTERDECK_HOME.

CLUSTERDECK_HOME exists so tests and side-by-side clusters never share state with the user's
own installation; it replaces all three appdirs roots at once.
"""

from __future__ import annotations

import os
from pathlib import Path

import appdirs

APP_NAME = "clusterdeck"
HOME_ENV = "CLUSTERDECK_HOME"


def _root(kind: str) -> Path:
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home) / kind
    finder = {
        "config": appdirs.user_config_dir,
        "data": appdirs.user_data_dir,
        "logs": appdirs.user_log_dir,
    }[kind]
    return Path(finder(APP_NAME))


def config_dir() -> Path:
    return _root("config")


def data_dir() -> Path:
    return _root("data")


def log_dir() -> Path:
    return _root("logs")


def config_file() -> Path:
    return config_dir() / "clusterdeck.toml"


def cluster_dir(cluster_id: str) -> Path:
    """Per-cluster state: credentials, connection file, job store, work directory."""
    return data_dir() / "clusters" / cluster_id


def cluster_log_dir(cluster_id: str) -> Path:
    """The cluster's log folder, created readable by its owner only (0700): the logs hold
    job arguments, file paths and errors that other local users should not read."""
    path = log_dir() / cluster_id
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path
