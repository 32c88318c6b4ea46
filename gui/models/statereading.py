"""What the State view asks of a job's checkpoints and savepoints, answered by
``clusterdeck state --json`` (core/stateinspector, docs/state-inspector.md) in a child
process, as small rows ready to show: a page of keys, the biggest keys, sizes per
subtask, growth, a page of a diff.

Why a child: the state's codec imports pyspark, which the window never imports (an
import contract); the child reads with the command's own code and bounded memory, and
hands back one page. It finds the job's checkpoint folder as the command does: on this
machine, under the cluster's folder or ``ha.storage-dir``. Of a recording, the recorded
cluster's folder when this machine still has it; otherwise what the recording holds
instead (its checkpoints' acknowledged sizes, core/recorder/checkpoints.py) and why there
is no more. No Qt: blocking work, on the caller's thread (never the GUI's).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clusterdeck.core.config.settings import Config
from clusterdeck.core.node.frozen import cli_argv
from clusterdeck.core.recorder.checkpoints import (
    RecordedCheckpoint,
    recorded_checkpoints,
    recorded_cluster,
)

PAGE = 200
"""Keys (or changes) one page holds: what the view keeps of a vertex's keys at a time."""
TOP = 100
"""The biggest keys shown."""
TEXT_KEPT = 500
"""Characters of a key or value a row keeps (a value can be megabytes)."""
READ_TIMEOUT = 300.0
"""Seconds a read may take (a pass over a vertex's state) before it is given up."""
LATEST = ""
"""``which``: the job's latest completed checkpoint."""
SETTINGS = ("ha.storage-dir", "state.savepoints.dir")
"""The settings that say where a cluster's checkpoints and savepoints lie."""

RECORDING_HOLDS = ("The recording holds its checkpoints' sizes, not their state, and the "
                   "job's checkpoint folder is not on this machine: {why}")


class StateReadError(Exception):
    """Why the state asked for cannot be shown: the command's own one-line reason."""


@dataclass(frozen=True)
class StatePlace:
    """Where the view reads ``job_id``'s state: the cluster ``config`` names (its folder
    on this machine), and, of a recording, the recording's file (``config`` None: that of
    the cluster the recording names)."""

    job_id: str
    config: Config | None
    recording: Path | None = None


@dataclass(frozen=True)
class OpenedState:
    """``readable``: the job's checkpoint folder is here (``retained``: its completed
    checkpoints' ids); otherwise ``why_not``; ``recorded``: a recording's acknowledged
    checkpoints (empty for a cluster)."""

    place: StatePlace
    readable: bool
    why_not: str = ""
    retained: tuple[int, ...] = ()
    recorded: tuple[RecordedCheckpoint, ...] = ()


@dataclass(frozen=True)
class SizeRow:
    subtask: str
    keys: int  # -1: unknown (a recording's sizes)
    bytes: int

    @property
    def vertex(self) -> str:
        return self.subtask.rpartition("#")[0]


@dataclass(frozen=True)
class KeyRow:
    """A key's state as the view shows it: key and value as text (cut), its bytes."""

    subtask: str
    key: str
    value: str
    bytes: int


@dataclass(frozen=True)
class ChangeRow:
    kind: str  # added, removed or changed
    subtask: str
    key: str
    before: str
    after: str


@dataclass(frozen=True)
class KeyQuery:
    """A page of a vertex's keys in ``which`` snapshot: those whose text contains
    ``search`` and begins with ``prefix``, from the ``offset``-th on."""

    which: str
    vertex: str
    search: str = ""
    prefix: str = ""
    offset: int = 0


@dataclass(frozen=True)
class KeyPageRows:
    label: str  # the snapshot's, ``checkpoint 3``
    query: KeyQuery
    rows: tuple[KeyRow, ...]
    matched: int


@dataclass(frozen=True)
class DiffQuery:
    before: str
    after: str
    vertex: str = ""
    offset: int = 0


@dataclass(frozen=True)
class DiffRows:
    label: str  # ``checkpoint 1 -> checkpoint 3``
    query: DiffQuery
    rows: tuple[ChangeRow, ...]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class GrowthPoint:
    """Per vertex id, ``(keys, bytes)`` at one checkpoint (keys -1: only the snapshot
    files' bytes are known, from a recording)."""

    checkpoint_id: int
    vertices: dict[str, tuple[int, int]]


def open_state(place: StatePlace, config_of: Callable[[str], Config]) -> OpenedState:
    """The job's retained checkpoints on this machine, or why not and what a recording
    holds instead; ``config_of(cluster_id)``: the configuration of a recording's cluster."""
    recorded: tuple[RecordedCheckpoint, ...] = ()
    if place.recording is not None:
        recorded = tuple(recorded_checkpoints(place.recording, place.job_id))
        if place.config is None:
            place = replace(place, config=config_of(recorded_cluster(place.recording)))
    try:
        answer = _state(place, "checkpoints")
    except StateReadError as error:
        why = RECORDING_HOLDS.format(why=error) if place.recording is not None else str(error)
        return OpenedState(place, False, why, (), recorded)
    return OpenedState(replace(place, job_id=answer["job"]), True, "",
                       tuple(int(c) for c in answer["checkpoints"]), recorded)


def read_sizes(opened: OpenedState, which: str) -> tuple[str, list[SizeRow]]:
    answer = _state(opened.place, "vertices", *_where(which))
    return answer["snapshot"], [SizeRow(row["subtask"], int(row["keys"]), int(row["bytes"]))
                                for row in answer["subtasks"]]


def read_keys(opened: OpenedState, query: KeyQuery) -> KeyPageRows:
    answer = _state(opened.place, "keys", query.vertex, *_where(query.which),
                    "--offset", str(query.offset), "--limit", str(PAGE),
                    "--search", query.search, "--prefix", query.prefix)
    return KeyPageRows(answer["snapshot"], query, _key_rows(answer), int(answer["matched"]))


def read_top(opened: OpenedState, which: str, vertex: str) -> KeyPageRows:
    answer = _state(opened.place, "top", vertex, *_where(which), "--limit", str(TOP))
    rows = _key_rows(answer)
    return KeyPageRows(answer["snapshot"], KeyQuery(which, vertex), rows, len(rows))


def read_growth(opened: OpenedState) -> list[GrowthPoint]:
    """Per retained checkpoint, keys and bytes per vertex; of a recording without its
    folder, the acknowledged file bytes per vertex of every recorded checkpoint."""
    if not opened.readable:
        return [GrowthPoint(c.checkpoint_id, {vertex: (-1, size) for vertex, size
                                              in c.bytes_by_vertex().items()})
                for c in opened.recorded]
    answer = _state(opened.place, "growth")
    return [GrowthPoint(int(row["checkpoint"]), {
                vertex: (int(size["keys"]), int(size["bytes"]))
                for vertex, size in row["vertices"].items()})
            for row in answer["checkpoints"]]


def read_diff(opened: OpenedState, query: DiffQuery) -> DiffRows:
    answer = _state(opened.place, "diff", query.before or _latest(opened),
                    query.after or _latest(opened), "--vertex", query.vertex,
                    "--offset", str(query.offset), "--limit", str(PAGE))
    return DiffRows(f"{answer['before']} \u2192 {answer['after']}", query, tuple(
        ChangeRow(row["change"], row["subtask"], _text(row["key"]),
                  "" if row["before"] is None else _text(row["before"]),
                  "" if row["after"] is None else _text(row["after"]))
        for row in answer["changes"]), {kind: int(n) for kind, n in answer["counts"].items()})


def _latest(opened: OpenedState) -> str:
    return str(opened.retained[-1]) if opened.retained else "0"


def _where(which: str) -> list[str]:
    """``LATEST``, a checkpoint id, or a savepoint's folder, as the command's option."""
    if which == LATEST:
        return []
    return ["--checkpoint", which] if which.isdigit() else ["--savepoint", which]


def _state(place: StatePlace, *arguments: str) -> dict[str, Any]:
    """``clusterdeck state JOB ARGUMENTS --json`` of the place's cluster, its answer."""
    config = place.config
    assert config is not None
    settings = [f"-D{key}={config[key]}" for key in SETTINGS if config[key]]
    command = cli_argv("state", place.job_id, *arguments, "--json", "--cluster",
                       config["cluster.id"], *settings)
    code, out, err = run_command(command)
    if code != 0:
        lines = [line for line in err.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"clusterdeck state exited {code}"
        raise StateReadError(reason.removeprefix("clusterdeck: "))
    try:
        answer = json.loads(out)
    except ValueError as error:
        raise StateReadError(f"clusterdeck state answered no JSON: {error}") from None
    if not isinstance(answer, dict):
        raise StateReadError("clusterdeck state answered no JSON object")
    return answer


def run_command(command: list[str]) -> tuple[int, str, str]:
    """The child's exit code, output and errors; killed after ``READ_TIMEOUT``."""
    try:
        done = subprocess.run(command, capture_output=True, timeout=READ_TIMEOUT, text=True,
                              check=False)
    except subprocess.TimeoutExpired:
        raise StateReadError(f"reading the state took over {READ_TIMEOUT:g} s; given "
                             "up") from None
    except OSError as error:
        raise StateReadError(f"cannot run clusterdeck state: {error}") from None
    return done.returncode, done.stdout, done.stderr


def _key_rows(answer: dict[str, Any]) -> tuple[KeyRow, ...]:
    return tuple(KeyRow(row["subtask"], _text(row["key"]), _text(row["value"]),
                        int(row["bytes"])) for row in answer["keys"])


def _text(value: Any) -> str:
    """A key or value as the view shows it: a text as it is, anything else as JSON (a
    tuple as a list, bytes as base64), cut to ``TEXT_KEPT`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= TEXT_KEPT else f"{text[:TEXT_KEPT - 1]}\u2026"
