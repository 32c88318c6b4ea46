"""The layout of a reproduction folder, its manifest, and the one way to name a path in it.

::

    run.txt               what the folder holds and how to run it
    reproduction.json     the manifest (``Reproduction``), written last: a folder without
                          it was cut short
    job.zip               the job's artifact as submitted (its SHA-256 in the manifest)
    job/                  the artifact unpacked: the job file and the modules it imports
    input/                copies of the subtask's input: the files of its splits, the
                          result partitions it read, a script's file arguments
    state/                a streaming subtask's checkpoint: ``<job id>/chk-<n>/`` and the
                          shared files its handles name (CheckpointStorage's layout)
    output/               where the reproduction's sinks write (never the job's own folders)

Paths in the manifest are relative to the folder and checked on the way in and out
(``inside``): a folder someone handed over may be hostile, and nothing read from the
cluster may make a write land outside the folder.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from clusterdeck.core.protocol.checkpoints import StateHandle
from clusterdeck.core.protocol.jobgraph import InputSplit, JobGraph
from clusterdeck.core.rpc import CodecError, from_data, to_data

FORMAT = 1
MANIFEST = "reproduction.json"
RUN_TEXT = "run.txt"
ARTIFACT = "job.zip"
JOB = "job"
INPUT = "input"
STATE = "state"
OUTPUT = "output"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_INPUT_BYTES = 256 * 1024 * 1024
"""The most bytes of input and state a folder holds unless ``--max-input-bytes`` says more:
a copy, not a second cluster's disk."""

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.MULTILINE)


class ReproductionError(Exception):
    """Why no reproduction folder can be written or run; the message says what to do."""


@dataclass(frozen=True)
class ExpectedFailure:
    """How the attempt failed on the cluster: what the run must show again. ``file`` is
    the base name of the job's own file of its last frame, ``line`` its line (``""``, 0:
    no frame of the job's files in the traceback)."""

    exception_type: str
    message: str
    file: str = ""
    line: int = 0
    traceback: str = ""


@dataclass(frozen=True)
class CopiedPartition:
    """One result partition a non-source subtask read: ``producer_dir`` is the copy
    (relative) of its producer attempt's partitions folder, which holds it."""

    producer_dir: str
    input_index: int
    producer_attempt_id: str
    producer_vertex_id: str
    producer_subtask: int
    partition: int


@dataclass(frozen=True)
class Reproduction:
    """What the folder holds, for the runner. ``graph`` is the job's as submitted;
    ``splits`` are the subtask's input splits, a file's ``path`` relative to the folder;
    ``spark_conf``: every ``spark.*`` setting the attempt's session had (the cluster's and
    a script's own); ``checkpoint_id`` and ``states``: the checkpoint a streaming attempt
    was restored from and each subtask's snapshot in ``state/`` (0 and none: it started
    afresh); ``script_args``: a script's arguments, files among them pointing into
    ``input/``; ``cores``: N of ``local[N]``."""

    job_id: str
    job_name: str
    graph: JobGraph
    args: tuple[str, ...]
    vertex_id: str
    subtask: int
    attempt: int
    attempt_id: str
    job_file: str
    artifact_sha256: str
    expected: ExpectedFailure
    cores: int
    splits: tuple[InputSplit, ...] = ()
    inputs: tuple[CopiedPartition, ...] = ()
    spark_conf: dict[str, str] = field(default_factory=dict)
    checkpoint_id: int = 0
    states: dict[str, StateHandle] = field(default_factory=dict)
    script_args: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    format: int = FORMAT


def inside(folder: Path, relative: str) -> Path:
    """``relative`` under ``folder``; ReproductionError for an absolute path, a ``..``,
    a backslash or a link that leads out."""
    parts = PurePosixPath(relative).parts
    if (not parts or relative.startswith("/") or "\\" in relative or ".." in parts
            or ":" in parts[0]):
        raise ReproductionError(f"{relative!r} is not a path inside the folder")
    path = folder.joinpath(*parts)
    root = os.path.realpath(folder)
    if os.path.commonpath([root, os.path.realpath(path)]) != root:
        raise ReproductionError(f"{relative!r} leads out of the folder")
    return path


def write_manifest(folder: Path, reproduction: Reproduction) -> None:
    text = json.dumps(to_data(reproduction), indent=1, sort_keys=True)
    temporary = folder / f".{MANIFEST}.tmp"
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, folder / MANIFEST)


def read_manifest(folder: Path) -> Reproduction:
    """The folder's manifest, validated; ReproductionError says what is wrong."""
    path = folder / MANIFEST
    try:
        with open(path, "rb") as source:
            data = source.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise ReproductionError(f"{folder} is not a reproduction folder: it has no "
                                f"{MANIFEST} (write one with clusterdeck reproduce JOB)"
                                ) from None
    except OSError as error:
        raise ReproductionError(f"{path} cannot be read: {error}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ReproductionError(f"{path} is over {MAX_MANIFEST_BYTES} bytes")
    try:
        reproduction = from_data(json.loads(data), Reproduction, MANIFEST)
    except (ValueError, CodecError, RecursionError) as error:
        raise ReproductionError(f"{path} is not a reproduction manifest: "
                                f"{str(error)[:300]}") from None
    if reproduction.format != FORMAT:
        raise ReproductionError(f"{path} has format {reproduction.format}; this "
                                f"clusterdeck reads format {FORMAT}")
    for relative in (reproduction.job_file, *(split.path for split in reproduction.splits
                                              if split.path),
                     *(partition.producer_dir for partition in reproduction.inputs)):
        inside(folder, relative)
    return reproduction


def expected_failure(exception_type: str, message: str, traceback: str,
                     job_files: set[str]) -> ExpectedFailure:
    """The failure to expect again; its frame is the last one in one of ``job_files``
    (the base names of the artifact's files)."""
    frames = [(Path(match["file"]).name, int(match["line"]))
              for match in _FRAME.finditer(traceback)
              if Path(match["file"]).name in job_files]
    file, line = frames[-1] if frames else ("", 0)
    return ExpectedFailure(exception_type, message, file, line, traceback)


def run_text(reproduction: Reproduction, folder: Path) -> str:
    """run.txt: what failed, what the folder holds, how to run it."""
    expected = reproduction.expected
    where = f" at {expected.file}:{expected.line}" if expected.line else ""
    lines = [
        f"Reproduction of job {reproduction.job_name} ({reproduction.job_id}), "
        f"{reproduction.vertex_id} subtask {reproduction.subtask}, attempt "
        f"{reproduction.attempt} ({reproduction.attempt_id}).",
        "",
        f"It failed on the cluster with {expected.exception_type}: {expected.message}{where}",
        "",
        "Run it here (no cluster needed; Spark runs as local"
        f"[{reproduction.cores}] in that process):",
        f"    python -m clusterdeck.core.reproduce {folder}",
        f"    clusterdeck reproduce --run {folder} [--pdb | --debugpy PORT]",
        "--pdb stops in the debugger at the failing frame (post-mortem); --debugpy PORT "
        "waits for an editor to attach first (needs debugpy installed).",
        "",
        "What it holds:",
        f"  {ARTIFACT}, {JOB}/   the job as submitted (SHA-256 "
        f"{reproduction.artifact_sha256[:16]}...), entry {reproduction.job_file}",
        f"  arguments           {list(reproduction.script_args or reproduction.args)}",
        f"  Spark settings      {reproduction.spark_conf or 'none beyond local[N]'}",
    ]
    if reproduction.splits:
        lines.append(f"  {INPUT}/              {len(reproduction.splits)} input split(s)")
    if reproduction.inputs:
        lines.append(f"  {INPUT}/              {len(reproduction.inputs)} input partition(s)")
    if reproduction.checkpoint_id:
        lines.append(f"  {STATE}/              checkpoint {reproduction.checkpoint_id}, "
                     f"which the attempt was restored from ({len(reproduction.states)} "
                     f"subtask snapshot(s))")
    lines.append(f"  {OUTPUT}/             where the run's sinks write")
    lines.extend(f"Note: {note}" for note in reproduction.notes)
    return "\n".join(lines) + "\n"
