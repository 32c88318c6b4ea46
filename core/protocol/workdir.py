"""The layout of a job's work dir: which folder holds what, and the file of each attempt.

A job's work dir is ``<work root>/<job id>``, on the JobManager's machine and, for the
attempts they run, on each TaskManager's. Paths under it travel in messages
(``TaskResult``, ``JobResult``, ``TaskOutput``), are read back by the JobMaster and served by
the data service and the Dispatcher, so the layout is part of the protocol: it does not
change. Files of an attempt are named after its id (``ids.attempt_file_stem``).

It lives beside the messages rather than in ``core/config/paths.py``: that module finds this
machine's own folders (appdirs, CLUSTERDECK_HOME), while this layout is what processes on
different machines agree on, whatever root each of them has.
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterdeck.core.protocol.ids import attempt_file_stem

PARTITIONS = "partitions"  # result partitions: one folder per producer attempt
COLLECT = "collect"  # the rows a collect() sink gathered: one JSON file per attempt
OUTPUT = "output"  # what each attempt printed: <attempt>.stdout and <attempt>.stderr
CHECKPOINTS = "checkpoints"  # a streaming job's checkpoints (CheckpointStorage's root)
KEYED_STATE = "keyed-state"  # the rocksdb state backend's database of each attempt (local)
FILES_MANIFEST = "result-files.json"  # every output and collected file of a large result
# A result partition's completion marker, in its folder, written when the rest is whole
# (core/engine/exchange.py): partitions/<attempt>/<edge>/<partition>/_complete.json.
COMPLETE_FILE = "_complete.json"

TASK_FOLDERS = (PARTITIONS, COLLECT, OUTPUT, CHECKPOINTS)
"""What tasks write, so what a TaskManager's data service may serve."""

RESULT_FOLDERS = (COLLECT, OUTPUT)
"""A finished job's result files, beside its manifest: what a client may fetch."""


def job_work_dir(work_root: Path, job_id: str) -> Path:
    return work_root / job_id


def partitions_dir(work_dir: str | os.PathLike[str], attempt_id: str) -> Path:
    """The folder that holds the result partitions attempt ``attempt_id`` produced."""
    return Path(work_dir) / PARTITIONS / attempt_file_stem(attempt_id)


def whole_partitions(work_dir: str | os.PathLike[str], attempt_id: str) -> int:
    """How many of the result partitions of attempt ``attempt_id`` are whole on this
    machine's disk (their completion marker is here)."""
    return sum(1 for _ in partitions_dir(work_dir, attempt_id).glob(f"*/*/{COMPLETE_FILE}"))


def collected_rows_file(work_dir: str | os.PathLike[str], attempt_id: str) -> Path:
    return Path(work_dir) / COLLECT / f"{attempt_file_stem(attempt_id)}.json"


def printed_output_file(work_dir: str | os.PathLike[str], attempt_id: str,
                        stream: str) -> Path:
    """The file that holds all an attempt printed on ``stream`` ("stdout" or "stderr")."""
    return Path(work_dir) / OUTPUT / f"{attempt_file_stem(attempt_id)}.{stream}"


def checkpoints_dir(work_dir: str | os.PathLike[str]) -> Path:
    return Path(work_dir) / CHECKPOINTS


def keyed_state_dir(work_dir: str | os.PathLike[str], attempt_id: str) -> Path:
    """Where attempt ``attempt_id`` keeps its keyed state with the rocksdb state backend:
    on its own TaskManager's disk, deleted when the attempt ends (or with the work dir)."""
    return Path(work_dir) / KEYED_STATE / attempt_file_stem(attempt_id)
