"""Sinks: text, CSV and Parquet folders, and collect() back to the client.

A file sink writes into a folder the job owns. Each subtask attempt writes with Spark's
writers into its own staging folder, ``<path>/_attempts/<attempt id>/``, which readers
skip (Spark ignores names starting with ``_``). When the attempt finishes, ``publish``
moves its files to ``<path>/part-<subtask>-<n>.<ext>``, replacing the files an earlier
attempt of the same subtask published: a restarted subtask never leaves duplicates. The
first attempt of a subtask in a job's first run skips that search (``first``): nothing
can have published before it, and listing a folder of thousands of parts for each of
thousands of subtasks made the sink's cost grow with the square of the parallelism.
The JobMaster prepares the folders before a run (``jobapi.sinkfolders.initialize_sinks``,
which owns the staging folder's name).

Python records go to a text sink straight from Spark's Python workers (``TextPartWriter``),
one file per non-empty Spark partition: through a DataFrame they cost a conversion, a SQL
plan and Hadoop's output committer, which is what the staging folder and ``publish``
already do for a subtask, and was most of a small subtask's time (docs/benchmarks.md).

Runs on the slot thread.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

from clusterdeck.core.engine.exchange import output_not_visible
from clusterdeck.core.engine.records import (
    SCALAR,
    SCALAR_COLUMN,
    RowDecoder,
    table_shape,
    text_line,
    to_jsonable,
)
from clusterdeck.core.engine.streams import Records, Stream, Table, Work, as_records, as_table
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.sinkfolders import STAGING
from clusterdeck.core.protocol.jobgraph import OperatorSpec


class FileSinkWriter:
    """One subtask attempt's output into one file sink: staged per batch, then published."""

    def __init__(self, op: OperatorSpec, subtask_index: int, attempt_id: str,
                 first: bool = False) -> None:
        self.op = op
        self.first = first
        self.folder = Path(op.params["path"])
        self.subtask_index = subtask_index
        self.staging = self.folder / STAGING / attempt_id
        self._batches = 0
        self._tag = re.sub(r"[^A-Za-z0-9]+", "_", attempt_id)
        self._unpublished: list[Path] = []  # written by write_lines, in the folder itself

    def write(self, work: Work, stream: Stream) -> None:
        target = str(self.staging / f"batch-{self._batches}")
        self._batches += 1
        if self.op.kind == plan.SINK_TEXT and isinstance(stream, Records):
            work.check()
            stream.rdd.mapPartitionsWithIndex(TextPartWriter(target)).collect()
            return
        if self.op.kind == plan.SINK_TEXT:
            df = _text_frame(work, stream)
            work.check()
            df.write.text(target)
            return
        df = as_table(work, stream)
        if not df.columns:
            return   # no records and no known columns: nothing to write
        work.check()
        if self.op.kind == plan.SINK_CSV:
            df.write.csv(target, header=self.op.params["header"])
        else:
            df.write.parquet(target)

    def write_lines(self, records: Iterable[Any]) -> None:
        """Records written as text lines from this thread (local execution), into a
        hidden ``.part-*`` file of the sink's own folder until ``publish``: making and
        removing five levels of staging folders was most of a one-row subtask's cost.
        ``initialize_sinks`` removes such files that a killed attempt left behind."""
        hidden = self.folder / (f".part-{self.subtask_index:05d}-{self._tag}-"
                                f"{len(self._unpublished)}.txt")
        self._unpublished.append(hidden)
        if not write_text_file(str(hidden), records):
            self._unpublished.pop()

    def publish(self, records_written: int = 0) -> list[str]:
        """Move the staged files to their final names; returns them. ``records_written``
        records with no file to publish fail the attempt (OutputNotVisible) rather than
        finish it with no output: Spark's executors wrote them on a disk not this one."""
        prefix = f"part-{self.subtask_index:05d}-"
        if not self.first:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    if entry.name.startswith(prefix):
                        os.unlink(entry.path)
        published: list[str] = []
        for hidden in self._unpublished:
            final = self.folder / f"{prefix}{len(published):03d}.txt"
            os.replace(hidden, final)
            published.append(str(final))
        self._unpublished.clear()
        if self._batches:  # else nothing staged, no staging folder (a subtask with no input)
            self._publish_staged(prefix, published)
            self.discard()
        if records_written and not published:
            raise output_not_visible(records_written, self.op.id, str(self.folder))
        return published

    def _publish_staged(self, prefix: str, published: list[str]) -> None:
        for batch in (self.staging / f"batch-{n}" for n in range(self._batches)):
            if not batch.is_dir():
                continue  # a batch with no records and no columns writes nothing
            for data_file in sorted(batch.iterdir()):
                if data_file.name.startswith(("_", ".")) or not data_file.is_file():
                    continue
                final = self.folder / f"{prefix}{len(published):03d}{''.join(data_file.suffixes)}"
                os.replace(data_file, final)
                published.append(str(final))

    def discard(self) -> None:
        """Remove this attempt's staging folder and unpublished files (on failure, cancel,
        or after publish)."""
        for hidden in self._unpublished:
            hidden.unlink(missing_ok=True)
        self._unpublished.clear()
        if not self._batches:
            return  # no staging folder was made
        shutil.rmtree(self.staging, ignore_errors=True)
        # An attempt id has slashes (job/vertex#i/aN): remove the folders it made, up to
        # and with _attempts, as they become empty.
        with suppress(OSError):   # other attempts are still writing, or it is gone already
            for parent in self.staging.relative_to(self.folder).parents[:-1]:
                (self.folder / parent).rmdir()


class TextPartWriter:
    """Writes one Spark partition's records as lines of ``<folder>/part-<partition>.txt``
    (UTF-8, ``\n`` after each line, as Spark's text writer does), in Spark's Python
    worker. The file is written under a hidden name and renamed when whole, so a failed
    or killed task never leaves half a part to publish; an empty partition writes none."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __call__(self, partition: int, records: Iterable[Any]) -> Iterator[int]:
        hidden = os.path.join(self.folder, f".part-{partition:05d}.txt.writing")
        written = write_text_file(hidden, records, make_folder)
        if written:
            os.replace(hidden, os.path.join(self.folder, f"part-{partition:05d}.txt"))
        yield written


def write_text_file(path: str, records: Iterable[Any],
                    make: Callable[[str], None] | None = None) -> int:
    """Each record as a line of ``path`` (UTF-8, ``\n`` after each, as Spark's text
    writer); the file is made at the first record (its folder too, by ``make``), so no
    records make no file. Returns how many were written."""
    written = 0
    out = None
    try:
        for written, record in enumerate(records, 1):  # noqa: B007 (written counts)
            if out is None:
                if make is not None:
                    make(os.path.dirname(path))
                out = open(path, "w", encoding="utf-8", errors="replace",  # noqa: SIM115
                           newline="")
            out.write(text_line(record))
            out.write("\n")
    finally:
        if out is not None:
            out.close()
    return written


def make_folder(path: str, tries: int = 20) -> None:
    """``os.makedirs`` that survives another attempt of the job removing an empty parent
    (``FileSinkWriter.discard``) while this one creates its staging folder."""
    for _ in range(tries - 1):
        try:
            os.makedirs(path, exist_ok=True)
            return
        except FileNotFoundError:
            continue
    os.makedirs(path, exist_ok=True)


def _text_frame(work: Work, stream: Stream) -> Any:
    if (isinstance(stream, Table) and table_shape(stream.df.columns) == SCALAR
            and dict(stream.df.dtypes)[SCALAR_COLUMN] == "string"):
        return stream.df
    lines = as_records(stream).map(lambda record: (text_line(record),))
    return work.session.createDataFrame(lines, f"{SCALAR_COLUMN} STRING", verifySchema=False)


def collect_rows(work: Work, stream: Stream) -> list[Any]:
    """Every record of the stream as JSON-able values, in the driver."""
    work.check()
    if isinstance(stream, Records):
        return stream.rdd.map(to_jsonable).collect()
    decode = RowDecoder(table_shape(stream.df.columns))
    return [to_jsonable(decode(row)) for row in stream.df.collect()]
