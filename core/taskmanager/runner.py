"""How a TaskManager runs one deployed task on its slot thread: the bridge between the
deployment (what the JobMaster sent) and the Spark work of ``clusterdeck.core.engine.runtime``.

Result partitions live under the job's work dir, one folder per producer attempt, so a
consumer finds them from the partition references in its deployment alone; one it cannot
find fails the attempt with PartitionNotFound, naming it and its producer. Collected
rows are written to a file there too: bulk data never travels in messages. ``kept``
is where this machine keeps the work dir (core/taskmanager/jobfolders.py): files are
written there, and named in the result by the work dir's path, as everyone else knows it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.dataservice.client import DEFAULT_TIMEOUT
from clusterdeck.core.engine.exchange import (
    InputPartition,
    PartitionNotFound,
    result_partition_path,
)
from clusterdeck.core.engine.localexecution import DEFAULT_MAX_RECORDS
from clusterdeck.core.engine.runtime import run_subtask
from clusterdeck.core.engine.streamtask import run_stream_subtask
from clusterdeck.core.jobapi.errors import SubtaskFailed
from clusterdeck.core.jobapi.loader import LoadedJob
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.ids import epoch_of
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.protocol.wiring import ResultPartitionRef
from clusterdeck.core.protocol.workdir import (
    checkpoints_dir,
    collected_rows_file,
    keyed_state_dir,
    partitions_dir,
    printed_output_file,
)
from clusterdeck.core.streaming.statebackend import StateBackendOptions
from clusterdeck.core.taskmanager.partitionfetch import fetcher
from clusterdeck.core.taskmanager.tasks import Task

_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)?)"
                             r"(?::\s?(.*))?$")


def checkpoint_storage(kept: str) -> CheckpointStorage:
    """Where a streaming subtask writes its snapshots and reads the one it restores."""
    return CheckpointStorage(checkpoints_dir(kept))


def input_partitions(deployment: p.SubmitTask, kept: str) -> list[list[InputPartition]]:
    """Per input edge, in input order, the result partitions this subtask reads: their
    folders here and their producers (named if a partition cannot be read)."""
    return [[_input_partition(deployment, kept, edge.input_index, ref)
             for ref in edge.partitions]
            for edge in sorted(deployment.inputs, key=lambda e: e.input_index)]


def _input_partition(deployment: p.SubmitTask, kept: str, input_index: int,
                     ref: ResultPartitionRef) -> InputPartition:
    producer_dir = partitions_dir(kept, ref.producer_attempt_id)
    return InputPartition(result_partition_path(producer_dir, deployment.vertex_id,
                                                input_index, ref.partition),
                          deployment.vertex_id, input_index, ref)


def run_task(spark: Any, job: LoadedJob, deployment: p.SubmitTask, task: Task,
             kept: str | None = None,
             local_max_records: int = DEFAULT_MAX_RECORDS,
             backend: StateBackendOptions | None = None,
             fetch_timeout: float = DEFAULT_TIMEOUT) -> p.TaskResult:
    """Runs on the slot thread; raises what run_subtask raises. ``kept``: where the job's
    work dir is on this machine (default: at its own path); ``local_max_records``: see
    ``clusterdeck.core.engine.localexecution``; ``backend``: a streaming task's state
    backend (``state.backend``); ``fetch_timeout``: how long a fetch of an input
    partition from another TaskManager may stall (``taskmanager.data.fetch-timeout``)."""
    kept = kept or deployment.work_dir
    task.counts.slot_thread = (os.getpid(), threading.get_native_id())  # its flame graph's
    named = _naming(deployment.work_dir, kept)
    output_dir = partitions_dir(kept, deployment.attempt_id)
    try:
        if deployment.graph.kind is JobKind.STREAMING:
            services = task.services
            result = run_stream_subtask(spark, job, deployment, task.checkpoint_control,
                                        services.report_checkpoint, checkpoint_storage(kept),
                                        task.counts, live=task.live,
                                        printed=printed_output_file(
                                            kept, deployment.attempt_id, "stdout"),
                                        channels=services.channels, broker=services.broker,
                                        backend=dataclasses.replace(
                                            backend or StateBackendOptions(),
                                            folder=keyed_state_dir(kept,
                                                                   deployment.attempt_id)))
        else:
            result = run_subtask(spark, job, deployment.vertex_id, deployment.subtask,
                                 deployment.attempt_id, input_partitions(deployment, kept),
                                 task.splits(), output_dir,
                                 split_share=deployment.split_share,
                                 fetch_missing=fetcher(deployment, kept, task.canceled,
                                                       fetch_timeout),
                                 live=task.live, counts=task.counts,
                                 first=first_of_its_subtask(deployment),
                                 local_max_records=local_max_records)
        task.used_spark = result.used_spark
    except PartitionNotFound:
        raise  # not the user's: its type and lost producers reach the JobMaster as they are
    except SubtaskFailed as failure:  # a failed script's output is shown as well
        printed = _printed_files(deployment, kept, failure.stdout, failure.stderr)
        raise UserCodeFailure(failure, *map(named, printed)) from failure
    collected_path = ""
    if result.collected:
        rows = [row for op_rows in result.collected.values() for row in op_rows]
        path = collected_rows_file(kept, deployment.attempt_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rows), encoding="utf-8")
        collected_path = str(path)
    stdout_path, stderr_path = _printed_files(
        deployment, kept, "" if result.stdout_file else result.stdout, result.stderr)
    stdout_path = result.stdout_file or stdout_path  # a print sink wrote it as it went
    return p.TaskResult(
        records_in=result.records_in, records_out=result.records_out,
        counters=dict(result.counters),
        partitions=tuple(named(x.path) for x in result.partitions),
        outputs=tuple(f for files in result.sink_files.values() for f in files),
        collected_path=named(collected_path), stdout=p.printed_tail(result.stdout),
        stderr=p.printed_tail(result.stderr), stdout_path=named(stdout_path),
        stderr_path=named(stderr_path))


def first_of_its_subtask(deployment: p.SubmitTask) -> bool:
    """The first attempt of its subtask in the job's first run (epoch 0): the JobMaster
    initialized the sinks just before, so no earlier attempt published any file."""
    return deployment.attempt == 0 and epoch_of(deployment.attempt_id) == 0


def _naming(work_dir: str, kept: str) -> Any:
    """A path under ``kept`` as the same path under ``work_dir``; "" stays ""."""
    def named(path: str) -> str:
        return os.path.join(work_dir, os.path.relpath(path, kept)) if path else ""
    return named


def _printed_files(deployment: p.SubmitTask, kept: str, stdout: str,
                   stderr: str) -> tuple[str, str]:
    return (_printed_file(printed_output_file(kept, deployment.attempt_id, "stdout"), stdout),
            _printed_file(printed_output_file(kept, deployment.attempt_id, "stderr"), stderr))


def _printed_file(path: Path, text: str) -> str:
    """All of what a task printed, in a file beside its partitions; "" when it printed
    nothing. The message carries only its end (``printed_tail``)."""
    if not text:
        return ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="replace")
    return str(path)


class UserCodeFailure(Exception):
    """A subtask's failure with the user's exception type and message pulled out of the
    traceback's last line, so the root cause says ``ZeroDivisionError``, not SubtaskFailed.
    ``stdout_path``/``stderr_path``: the files of what a failed script printed."""

    def __init__(self, failure: SubtaskFailed, stdout_path: str = "",
                 stderr_path: str = "") -> None:
        super().__init__(failure.message)
        self.traceback_text = failure.traceback_text
        match = _EXCEPTION_LINE.match(failure.message.strip().splitlines()[-1]
                                      if failure.message.strip() else "")
        self.exception_type = match.group(1) if match else "SubtaskFailed"
        self.user_message = (match.group(2) or "") if match else failure.message
        self.stdout = failure.stdout
        self.stderr = failure.stderr
        self.exit_code = failure.exit_code
        self.stdout_path = stdout_path
        self.stderr_path = stderr_path
