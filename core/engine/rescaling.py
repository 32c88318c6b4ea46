"""A streaming subtask restored at another parallelism than its checkpoint's (Flink's
rescaling from a savepoint): its state made from the old subtasks' snapshots.

The JobMaster does not read state: when a job starts from a savepoint at another
parallelism, it writes each new subtask a state naming every old subtask's snapshot, and
hands it the shared files (``rocksdb``) of the old subtasks whose key groups overlap its
own (core/checkpointing/savepoints.py, ``RescaledState``). The task makes its state here:

- **Keyed state** (windows, running values, process values): the entries whose key's
  key group (core/protocol/keygroups.py) lies in this subtask's range, from whichever
  old subtasks hold them: with ``heap`` from the snapshots' JSON, with ``rocksdb`` from
  their chains of files, written into the new store through its change log (so the first
  checkpoint after the restore uploads the whole state as its first delta, the chain of
  the new subtask starting there). How far windows fired: the earliest of the old
  subtasks' (the same for all at an aligned checkpoint); the late count (a metric): all
  of it to subtask 0; an assigner's largest timestamp: the largest.
- **Sources**: the rate generator's indices not yet emitted are shared out anew
  (ratesource.rescaled_positions); an MQTT source's position is its broker session,
  which a new job does not have anyway (its counts start over); a watched folder's
  position (files are owned by a hash of their name modulo the parallelism) cannot be
  redistributed yet: refused.
- **The file sink**: subtask 0 commits every old subtask's pending files (the savepoint
  completed: they are output, committed again if the notice was lost); each subtask
  numbers its files on after the highest of its number in the folder.

Runs on the task's slot thread, once, before the first record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdeck.core.engine.keyedstate import key_group_of_key
from clusterdeck.core.engine.records import from_tagged
from clusterdeck.core.engine.streamparts import rate_position
from clusterdeck.core.jobapi import plan
from clusterdeck.core.protocol.jobgraph import OperatorSpec
from clusterdeck.core.protocol.keygroups import key_group_range
from clusterdeck.core.streaming.filesink import next_free_file
from clusterdeck.core.streaming.ratesource import RatePosition, rescaled_positions
from clusterdeck.core.streaming.statebackend import stored_key

Entries = Iterable[tuple[bytes, bytes | None]]


@dataclass(frozen=True)
class OldPart:
    """One old subtask's snapshot: its index, its state (JSON data) and its chain's
    entries (``rocksdb``; none with ``heap``), read only if this subtask takes any."""

    subtask: int
    state: dict[str, Any]
    entries: Callable[[], Entries]


class Rescaled:
    """Subtask ``subtask`` of ``parallelism`` made from ``parts``, every old subtask's
    (``len(parts)`` of them), with ``max_parallelism`` key groups."""

    def __init__(self, parts: list[OldPart], subtask: int, parallelism: int,
                 max_parallelism: int) -> None:
        self.parts = sorted(parts, key=lambda part: part.subtask)
        self.subtask = subtask
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism
        self.groups = key_group_range(max_parallelism, parallelism, subtask)

    def owns(self, key: Any) -> bool:
        return key_group_of_key(key, self.max_parallelism) in self.groups

    # -- keyed state -----------------------------------------------------------------------

    def chain(self) -> dict[str, Any] | None:
        """The chain's state (StreamChain.snapshot's shape) of this subtask's key groups,
        its stored entries counted as they are in the store (``stored`` below)."""
        states = [part.state.get("chain") for part in self.parts]
        present = [state for state in states if state is not None]
        if not present:
            return None
        largest = [s["largest_timestamp"] for s in present if s["largest_timestamp"] is not None]
        return {"largest_timestamp": max(largest) if largest else None,
                "windows": self._windows([s["windows"] for s in present]),
                "running": self._values([s["running"] for s in present]),
                "values": self._values([s.get("values") for s in present])}

    def _windows(self, states: list[Any]) -> Any:
        if all(state is None for state in states):
            return None
        fired = [state["fired_to"] for state in states]
        merged = {"fired_to": None if None in fired else min(fired),
                  "ended": all(state["ended"] for state in states),
                  "late": sum(state["late"] for state in states) if self.subtask == 0 else 0}
        if any("stored" in state for state in states):
            return {**merged, "stored": None}  # counted once the store is filled
        return {**merged, "open": [entry for state in states for entry in state["open"]
                                   if self.owns(from_tagged(entry[0]))]}

    def _values(self, states: list[Any]) -> Any:
        if all(state is None for state in states):
            return None
        if any(isinstance(state, dict) for state in states):
            return {"stored": None}
        return [entry for state in states for entry in state if self.owns(from_tagged(entry[0]))]

    def stored_entries(self, decode: Callable[[bytes], Any]) -> Iterator[tuple[bytes, bytes]]:
        """The ``rocksdb`` entries of this subtask's key groups, from the old subtasks'
        chains (each applied alone: a chain's later files overwrite its earlier ones)."""
        for part in self.parts:
            latest: dict[bytes, bytes | None] = {}
            for key, value in part.entries():
                latest[key] = value
            for key, value in latest.items():
                if value is not None and self.owns(decode(stored_key(key))):
                    yield key, value

    # -- sources and sinks -----------------------------------------------------------------

    def source(self, op: OperatorSpec) -> Any:
        """The source's state for this subtask (None: it starts afresh)."""
        states = [part.state.get("source") for part in self.parts]
        if op.kind == plan.SOURCE_RATE:
            old = [rate_position(state) or RatePosition(part.subtask)
                   for state, part in zip(states, self.parts, strict=True)]
            count = op.params.get("count")
            position = rescaled_positions(old, self.parallelism, count)[self.subtask]
            return {"next": position.next_index, "backlog": list(position.backlog)}
        if op.kind == plan.SOURCE_FOLDER:
            raise ValueError(f"{op.name}: a watched folder's position cannot be "
                             f"redistributed to another parallelism yet (its files belong to "
                             f"subtasks by a hash of their name); restore it at "
                             f"{len(self.parts)} subtasks")
        return None

    def sink(self, op: OperatorSpec) -> Any:
        """The sink's state for this subtask (None: it starts afresh)."""
        if op.kind != plan.SINK_TEXT:
            return None
        pending = [entry for part in self.parts
                   for entry in (part.state.get("sink") or {}).get("pending", ())] \
            if self.subtask == 0 else []
        own = [part.state.get("sink") or {} for part in self.parts
               if part.subtask == self.subtask]
        next_file = max([next_free_file(Path(op.params["path"]), self.subtask),
                         *(int(state.get("next_file", 0)) for state in own)])
        return {"subtask": self.subtask, "next_file": next_file, "pending": pending}


def heap_or_stored(state: Any) -> bool:
    """Whether a keyed state part says its entries are in the store."""
    return isinstance(state, dict) and "stored" in state


def counted(chain: dict[str, Any], windows: int, values: int) -> dict[str, Any]:
    """``Rescaled.chain``'s state with the store's counts filled in."""
    filled = dict(chain)
    if heap_or_stored(filled.get("windows")):
        filled["windows"] = {**filled["windows"], "stored": windows}
    for part in ("running", "values"):
        if heap_or_stored(filled.get(part)):
            filled[part] = {"stored": values}
    return filled



def state_format_error(found: Any, expected: int) -> str:
    """Why a checkpoint's keyed state does not restore into this job."""
    if found is None:
        return (f"the checkpoint's keyed state is of format 1 (routed by a hash of the key "
                f"modulo the parallelism, before key groups): this version restores state "
                f"by key group (max parallelism {expected}); start the job from a savepoint "
                f"of it instead, which is redistributed by key group")
    return (f"the checkpoint's keyed state has {found} key groups (its job's max "
            f"parallelism) and this job {expected}: a job's max parallelism is fixed for "
            f"its life")
