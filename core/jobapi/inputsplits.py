"""Input splits: how a source vertex's input is cut (JobMaster) and read (TaskManager).

The JobMaster's split assigner calls ``plan_splits`` once per source vertex and hands
the splits out one at a time to the source's subtasks, which read them with
``read_lines`` (text byte ranges) or Spark's readers (whole files).

File splits follow Hadoop's rule, so no line is lost or read twice: a file no bigger
than ``block_size * 1.1`` is one split (length -1 = whole file); a bigger one is cut into
byte ranges of ``block_size``. A line belongs to the split in which it *starts*: a range
that starts mid-line skips to the next line, and a range reads past its end to finish its
last line. Text files are cut; CSV and Parquet files are always read whole (a CSV
header and quoted newlines, Parquet's row groups do not survive a byte cut).

A small input is cut finer, so that every subtask of its source gets work: no text split
is bigger than the source's bytes over its parallelism (Hadoop's goal size, rounded up),
and ``fair_share`` (those bytes over the parallelism) is the most a subtask takes in one
batch. A big input keeps ``block_size`` splits.

A URL (``s3a://``, ``hdfs://``, ``file://`` on a shared mount) is not listed here: it is
one split, read whole by Spark's reader on the TaskManager that takes it (any of them),
and counts for nothing in a fair share (its size is not known here).

Collections and ranges are split into ``parallelism`` parts (``part`` of ``parts``).
Nothing here uses Spark, so the JobManager plans splits without importing it; the
engine's sources read them with ``part_bounds`` and ``read_lines`` (inside Spark's
Python workers).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence

from clusterdeck.core.jobapi import plan
from clusterdeck.core.protocol.jobgraph import InputSplit, JobVertex, is_url

DEFAULT_BLOCK_SIZE = 32 * 1024 * 1024
SPLIT_SLOP = 1.1   # Hadoop's: do not cut off a last block smaller than 10% of a block
# What Hadoop's codecs decompress by suffix for Spark's text reader: such a file is one
# split, read whole (a byte range of compressed data is not lines).
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".zstd", ".xz",
                       ".br", ".lzo")


def is_compressed(path: str) -> bool:
    return path.lower().endswith(COMPRESSED_SUFFIXES)
_GLOB_CHARS = set("*?[")


def resolve_paths(patterns: str | Sequence[str]) -> list[str]:
    """The files named by files, folders (all files below, hidden and ``_`` names
    skipped, as Spark does) and globs, sorted, each once. Raises FileNotFoundError for a
    pattern that matches nothing."""
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    files: list[str] = []
    for pattern in patterns:
        if is_url(pattern):  # Spark lists and reads it where the split runs
            files.append(pattern)
            continue
        if _GLOB_CHARS & set(pattern):
            matches = sorted(glob.glob(pattern, recursive=True))
        else:
            matches = [pattern] if os.path.exists(pattern) else []
        found = [f for match in matches for f in _files_under(match)]
        if not found:
            raise FileNotFoundError(f"no input files match {pattern!r}")
        files.extend(found)
    return list(dict.fromkeys(files))


def _files_under(path: str) -> list[str]:
    if os.path.isfile(path):
        return [os.path.abspath(path)]
    found = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        found.extend(os.path.abspath(os.path.join(folder, name)) for name in sorted(names)
                     if not name.startswith(("_", ".")))
    return found


def plan_file_splits(paths_or_glob: str | Sequence[str], block_size: int = DEFAULT_BLOCK_SIZE,
                     *, vertex_id: str = "", splittable: bool = True,
                     first_split_id: int = 0, parallelism: int = 1) -> list[InputSplit]:
    """The splits of the files named by ``paths_or_glob`` for a source of ``parallelism``
    subtasks (see the module docstring)."""
    if block_size < 1:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if parallelism < 1:
        raise ValueError(f"parallelism must be positive, got {parallelism}")
    paths = resolve_paths(paths_or_glob)
    sizes = {path: os.path.getsize(path) for path in paths if not is_url(path)}
    block_size = min(block_size, max(1, _per_subtask(sum(sizes.values()), parallelism)))
    splits: list[InputSplit] = []
    for path in paths:
        if is_url(path):  # no size to cut by: one split, read whole by Spark
            splits.append(InputSplit(first_split_id + len(splits), vertex_id, path=path))
            continue
        size = sizes[path]
        if not splittable or is_compressed(path) or size <= block_size * SPLIT_SLOP:
            splits.append(InputSplit(first_split_id + len(splits), vertex_id, path=path))
            continue
        start = 0
        while start < size:
            length = block_size if (size - start) > block_size * SPLIT_SLOP else size - start
            splits.append(InputSplit(first_split_id + len(splits), vertex_id, path=path,
                                     start=start, length=length))
            start += length
    return splits


def plan_splits(vertex: JobVertex, block_size: int = DEFAULT_BLOCK_SIZE) -> list[InputSplit]:
    """All input splits of a source vertex (called by the JobMaster once per job)."""
    source = vertex.operators[0]
    if source.kind in plan.FILE_SOURCES:
        return plan_file_splits(source.params["paths"], block_size, vertex_id=vertex.id,
                                splittable=source.kind == plan.SOURCE_TEXT,
                                parallelism=vertex.parallelism)
    if source.kind in (plan.SOURCE_COLLECTION, plan.SOURCE_RANGE):
        return [InputSplit(part, vertex.id, part=part, parts=vertex.parallelism)
                for part in range(vertex.parallelism)]
    raise ValueError(f"vertex {vertex.id} does not start with a source ({source.kind})")


def fair_share(splits: Sequence[InputSplit], parallelism: int) -> int:
    """A subtask's fair share of a source's input, in bytes: the sized splits' bytes over
    the source's parallelism, rounded up; 0 when no split has a size known here (URLs,
    generated input). A whole-file split counts its file's size now."""
    total = sum(split.length if split.length >= 0 else os.path.getsize(split.path)
                for split in splits if split.path and not is_url(split.path))
    return _per_subtask(total, parallelism)


def _per_subtask(total: int, parallelism: int) -> int:
    return -(-total // parallelism)


def part_bounds(count: int, part: int, parts: int) -> tuple[int, int]:
    """The contiguous slice ``[lo, hi)`` of ``count`` items that is ``part`` of ``parts``."""
    return count * part // parts, count * (part + 1) // parts


def read_lines(path: str, start: int = 0, length: int = -1) -> Iterator[str]:
    """The lines that start in ``[start, start + length)`` of a file (all lines when
    ``length`` is -1), without their line ending; text is UTF-8."""
    end = None if length < 0 else start + length
    with open(path, "rb") as stream:
        position = 0
        if start > 0:
            stream.seek(start - 1)
            position = start - 1 + len(stream.readline())
        for line in stream:
            if end is not None and position >= end:
                return
            position += len(line)
            if line.endswith(b"\n"):
                line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            yield line.decode("utf-8", "replace")
