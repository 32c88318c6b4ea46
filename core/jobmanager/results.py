"""Fitting a job's result into one message.

A JobResult is published once, kept by the Dispatcher and sent again to every client that
asks, so it must stay under ``rpc.framesize`` however large the job is. What grows with
the job is spilled: the lists of output and collected-row files go to a manifest file in
the job's work dir once they are long (a collect() sink writes one file per subtask: at
2,000 subtasks the list alone is larger than a frame), and the printed output keeps its
end. The message then names the manifest; ``clusterdeck.core.client.jobclient`` reads it back.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from clusterdeck.core.jobmanager.jobstore import write_atomically
from clusterdeck.core.protocol import messages as p

FILES_KEPT = 50  # file names a JobResult lists itself; the manifest has them all
MANIFEST = "result-files.json"


def fitted(result: p.JobResult, work_dir: Path) -> p.JobResult:
    """``result``, with long file lists spilled to a manifest and long output cut."""
    result = replace(result, stdout=p.printed_tail(result.stdout),
                     stderr=p.printed_tail(result.stderr),
                     stdout_paths=result.stdout_paths[:FILES_KEPT],
                     stderr_paths=result.stderr_paths[:FILES_KEPT])
    if len(result.outputs) <= FILES_KEPT and len(result.collected_paths) <= FILES_KEPT:
        return result
    manifest = work_dir / MANIFEST
    work_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(manifest, json.dumps({"outputs": list(result.outputs),
                                           "collected_paths": list(result.collected_paths)}
                                          ).encode())
    return replace(result, outputs=result.outputs[:FILES_KEPT],
                   collected_paths=result.collected_paths[:FILES_KEPT],
                   files_manifest=str(manifest), outputs_total=len(result.outputs),
                   collected_total=len(result.collected_paths))


def bare(result: p.JobResult) -> p.JobResult:
    """The last resort when even a fitted result exceeds the frame (user counters or
    failure records too large): status, counts and where to look, nothing else."""
    return replace(result, accumulators={}, records={}, stdout="", failure_history=(),
                   root_cause=None, outputs=(), collected_paths=(),
                   stderr="[the job's result was larger than rpc.framesize: counters, "
                   "output and failure records left out; see `clusterdeck failures` and "
                   "the attempt logs]\n")
