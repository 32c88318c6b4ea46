"""Key groups (Flink's ``KeyGroupRangeAssignment``): the unit keyed state is split into,
so that a streaming job can be restored at another parallelism.

A job has a *max parallelism* (128 by default, fixed for its life and recorded in its
checkpoints). A key's key group is the stable hash of its key string (BLAKE2b, 8 bytes,
the hash the keyed exchange always used: the same in every process and run) modulo the
max parallelism; subtask *i* of *p* owns the contiguous range of key groups
``key_group_range(max, p, i)``, and the exchange sends a record to the subtask owning its
key's group. Rescaling moves whole key groups: a new subtask restores exactly the keys
of its range from whichever old subtasks held them.

Pure functions, used by the job API (the bounds), the exchange and the keyed state (the
engine) and the savepoint checks (the JobManager).
"""

from __future__ import annotations

import hashlib

DEFAULT_MAX_PARALLELISM = 128
"""Flink's default for small jobs: room to grow a keyed vertex to 128 subtasks, at a cost
only paid on restore (a key group is a number computed from the key, not a structure)."""
UPPER_BOUND = 32768
"""The most key groups a job may have (Flink's ``UPPER_BOUND_MAX_PARALLELISM``, 2^15)."""


def key_hash(key: str) -> int:
    """The stable 64-bit hash of a key string (never Python's ``hash``, which is salted)."""
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def key_group_of(key: str, max_parallelism: int) -> int:
    """The key group of a key string."""
    return key_hash(key) % max_parallelism


def subtask_of_group(key_group: int, max_parallelism: int, parallelism: int) -> int:
    """The subtask of ``parallelism`` that owns ``key_group`` (Flink's
    ``computeOperatorIndexForKeyGroup``)."""
    return key_group * parallelism // max_parallelism


def subtask_of(key: str, max_parallelism: int, parallelism: int) -> int:
    """The subtask of ``parallelism`` that owns ``key``: where the exchange sends it."""
    return subtask_of_group(key_group_of(key, max_parallelism), max_parallelism, parallelism)


def key_group_range(max_parallelism: int, parallelism: int, subtask: int) -> range:
    """The key groups subtask ``subtask`` of ``parallelism`` owns, in order (Flink's
    ``computeKeyGroupRangeForOperatorIndex``): the inverse of ``subtask_of_group``."""
    check_parallelism(parallelism, max_parallelism)
    if not 0 <= subtask < parallelism:
        raise ValueError(f"subtask {subtask} of {parallelism}")
    start = (subtask * max_parallelism + parallelism - 1) // parallelism
    end = ((subtask + 1) * max_parallelism - 1) // parallelism
    return range(start, end + 1)


def check_max_parallelism(max_parallelism: int) -> int:
    if isinstance(max_parallelism, bool) or not isinstance(max_parallelism, int) \
            or not 1 <= max_parallelism <= UPPER_BOUND:
        raise ValueError(f"a max parallelism is a whole number from 1 to {UPPER_BOUND}, "
                         f"got {max_parallelism!r}")
    return max_parallelism


def check_parallelism(parallelism: int, max_parallelism: int) -> None:
    """A keyed vertex cannot have more subtasks than key groups."""
    if parallelism > max_parallelism:
        raise ValueError(f"a parallelism of {parallelism} is more than the job's max "
                         f"parallelism of {max_parallelism} (its key groups): raise it with "
                         f"env.set_max_parallelism before the job's first run")
