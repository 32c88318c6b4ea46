"""A file sink's folder, as the JobMaster prepares it before a job run.

A file sink (text, CSV, Parquet) writes into a folder the job owns: each subtask attempt
stages its files in ``<path>/_attempts/<attempt id>/`` (``STAGING``; readers skip names
starting with ``_``) and publishes them as ``<path>/part-*`` when it finishes (the
engine's ``sinks.FileSinkWriter``). ``initialize_sinks`` (once per job run, before any
task; the JobMaster's job, as Flink's ``OutputFormat.initializeGlobal``) removes the
``part-*`` files of a previous run; it never deletes anything else in the folder.

Nothing here uses Spark, so the JobManager prepares sinks without importing it. Runs on
the JobMaster's main thread or a worker of it (and in the local runner).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from clusterdeck.core.jobapi import plan
from clusterdeck.core.protocol.jobgraph import JobGraph

STAGING = "_attempts"


def initialize_sinks(graph: JobGraph, keep_output: bool = False) -> None:
    """Create every file sink's folder; remove its ``part-*`` files and what attempts of
    an earlier run left in staging or in progress (a streaming sink's ``.part-*``).
    ``keep_output``: a streaming job started from a savepoint goes on with the output of
    the job before it, whose pending files its restored sinks commit or delete."""
    for vertex in graph.vertices:
        for op in vertex.operators:
            if op.kind in plan.FILE_SINKS:
                folder = Path(op.params["path"])
                folder.mkdir(parents=True, exist_ok=True)
                if keep_output:
                    continue
                for old in [*folder.glob("part-*"), *folder.glob(".part-*")]:
                    if old.is_file():
                        old.unlink()
                shutil.rmtree(folder / STAGING, ignore_errors=True)
