"""Capabilities for the data service: HMAC-SHA256 of a folder under a TaskManager's key.

A TaskManager makes a random key when it starts and gives it to the ResourceManager
in its registration (broker topics only the JobManager reads). The JobMaster of a job
turns the keys of the TaskManagers that hold the job's partitions into capabilities for
the job's work dir, and sends each consumer the ones it needs. The TaskManager checks a
capability by computing it again: it keeps no list of jobs or tokens, and a capability
for one job's folder opens no other folder.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

KEY_BYTES = 32
_CONTEXT = b"clusterdeck data service v1\n"


def new_key() -> str:
    return secrets.token_hex(KEY_BYTES)


def capability(key: str, root: str) -> str:
    """What opens the files under ``root`` on the TaskManager whose key is ``key``."""
    return hmac.new(bytes.fromhex(key), _CONTEXT + root.encode(), hashlib.sha256).hexdigest()


def allows(key: str, root: str, presented: str) -> bool:
    return hmac.compare_digest(capability(key, root), presented)
