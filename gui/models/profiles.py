"""Cluster profiles: named recipes for a local cluster, kept in the config dir.

A profile is what the cluster panel edits: how many TaskManagers with how many slots,
which broker, which Spark master, how many JobManagers (one leads, the others stand by:
docs/ha.md). It becomes a ``Config`` by laying its values over the
user's configuration file, so everything else (heartbeats, timeouts) stays as the user
set it. Stored as JSON, one file, written atomically. Plain Python: no Qt here.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from clusterdeck.core.config import paths
from clusterdeck.core.config import settings as cfg

BROKER_KINDS = ("auto", "mosquitto", "amqtt", "external")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FORMAT_VERSION = 1
MAX_JOBMANAGERS = 8  # one leader and its standbys on one machine; more only cost memory


class ProfileError(ValueError):
    """A profile value is wrong; the message says which."""


@dataclass(frozen=True)
class ClusterProfile:
    """One local cluster recipe; its ``name`` is also the cluster id."""

    name: str = cfg.DEFAULT_CLUSTER_ID  # the command line's default: `submit` finds it
    taskmanagers: int = 2
    slots: int = 2
    broker_kind: str = "auto"
    spark_master: str = ""
    jobmanagers: int = 1
    # More than ``taskmanagers`` started on demand, up to this (docs/elastic.md); 0: off.
    max_taskmanagers: int = 0

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ProfileError(f"profile name {self.name!r}: letters, digits, '.', '_' or "
                               "'-' only (it is the cluster id)")
        if not 1 <= self.taskmanagers <= 64:
            raise ProfileError("TaskManagers: between 1 and 64")
        if not 1 <= self.slots <= 256:
            raise ProfileError("slots per TaskManager: between 1 and 256")
        if self.broker_kind not in BROKER_KINDS:
            raise ProfileError(f"broker kind: one of {', '.join(BROKER_KINDS)}")
        if not 1 <= self.jobmanagers <= MAX_JOBMANAGERS:
            raise ProfileError(f"JobManagers: between 1 and {MAX_JOBMANAGERS}")
        if self.max_taskmanagers and not self.taskmanagers <= self.max_taskmanagers <= 64:
            raise ProfileError("TaskManagers on demand: 0 (off), or at least the TaskManagers "
                               "and at most 64")

    def overrides(self) -> dict[str, Any]:
        """With TaskManagers on demand, those of ``taskmanagers`` are the minimum the
        ResourceManager keeps, started by the local provider like the others."""
        elastic = {"elastic.provider": "local", "elastic.min-taskmanagers": self.taskmanagers,
                   "elastic.max-taskmanagers": self.max_taskmanagers} \
            if self.max_taskmanagers else {}
        return {"cluster.id": self.name, "taskmanager.count": self.taskmanagers,
                "taskmanager.slots": self.slots, "broker.kind": self.broker_kind,
                "spark.master": self.spark_master, "jobmanager.count": self.jobmanagers,
                **elastic}

    def to_config(self, config_file: Path | None = None) -> cfg.Config:
        """The user's configuration with this profile's values on top. Standbys need an
        election: ha.mode local unless the user's configuration chose one."""
        config = cfg.load(config_file, self.overrides())
        if self.jobmanagers > 1 and config["ha.mode"] == "none":
            config = config.with_overrides({"ha.mode": "local"})
        return config

    @staticmethod
    def from_dict(data: dict[str, Any]) -> ClusterProfile:
        known = {key: data[key] for key in ClusterProfile.__dataclass_fields__ if key in data}
        try:
            return ClusterProfile(**known)
        except TypeError as error:
            raise ProfileError(str(error)) from None


def profiles_file() -> Path:
    return paths.config_dir() / "profiles.json"


class ProfileStore:
    """The saved profiles, in the user's order; never empty (a default is made)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or profiles_file()
        self.problem: str | None = None  # why the file could not be read, if it could not
        self.profiles: list[ClusterProfile] = self._load()

    def names(self) -> list[str]:
        return [profile.name for profile in self.profiles]

    def get(self, name: str) -> ClusterProfile | None:
        return next((p for p in self.profiles if p.name == name), None)

    def put(self, profile: ClusterProfile, replacing: str | None = None) -> None:
        """Add ``profile``, or replace the one named ``replacing`` (or of the same name)."""
        old = replacing or profile.name
        for index, existing in enumerate(self.profiles):
            if existing.name == old:
                self.profiles[index] = profile
                break
        else:
            self.profiles.append(profile)
        self.profiles = list({p.name: p for p in self.profiles}.values())
        self.save()

    def remove(self, name: str) -> None:
        self.profiles = [p for p in self.profiles if p.name != name] or [ClusterProfile()]
        self.save()

    def unused_name(self, stem: str = "cluster") -> str:
        taken = set(self.names())
        return next(f"{stem}-{n}" for n in range(1, len(taken) + 2) if f"{stem}-{n}" not in taken)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {"version": _FORMAT_VERSION, "profiles": [asdict(p) for p in self.profiles]}
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)

    def _load(self) -> list[ClusterProfile]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
            profiles = [ClusterProfile.from_dict(item) for item in document["profiles"]]
        except FileNotFoundError:
            profiles = []
        except (OSError, ValueError, KeyError, TypeError) as error:
            self.problem = f"{self.path} is unreadable ({error}); using a default profile"
            profiles = []
        return profiles or [ClusterProfile()]
