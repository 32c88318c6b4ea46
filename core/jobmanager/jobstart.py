"""What a job needs before its scheduler starts, built on its JobMaster's main thread:
its sinks initialised, its input splits planned, a streaming job's checkpoints (going
on from an earlier run's, or from a savepoint) and the scheduler with the job's own
restart settings. Each raises ValueError (or OSError) for a job that cannot start; the
JobMaster fails the job with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from dataclasses import replace
from pathlib import Path
from typing import Any

from clusterdeck.core.checkpointing import (
    CheckpointStorage,
    CheckpointStorageError,
    CheckpointTask,
    Savepoints,
)
from clusterdeck.core.config.settings import Config
from clusterdeck.core.executiongraph.graph import ExecutionGraph
from clusterdeck.core.executiongraph.restart import restart_strategy
from clusterdeck.core.executiongraph.scheduler import Scheduler
from clusterdeck.core.executiongraph.splitassigner import InputSplitAssigner
from clusterdeck.core.jobapi.inputsplits import fair_share, plan_splits
from clusterdeck.core.jobapi.sinkfolders import initialize_sinks
from clusterdeck.core.jobmanager.checkpoints import JobCheckpoints
from clusterdeck.core.jobmanager.jobstore import JobRecord, ProgressLog
from clusterdeck.core.node.hostidentity import host_identity
from clusterdeck.core.protocol.jobgraph import InputSplit, JobKind, is_url
from clusterdeck.core.protocol.workdir import checkpoints_dir
from clusterdeck.core.rpc import MainThread

log = logging.getLogger(__name__)


def initialized_sinks(record: JobRecord) -> None:
    """A new job's sinks, made ready (a recovered job keeps what it wrote; one started
    from a savepoint what the job before it committed)."""
    if record.graph.kind in (JobKind.DATAFLOW, JobKind.STREAMING) and record.epoch == 0:
        initialize_sinks(record.graph, keep_output=record.graph.savepoint is not None)


def planned_splits(record: JobRecord, config: Config) -> InputSplitAssigner:
    """The input splits of a dataflow job's sources, planned here, served on request."""
    return InputSplitAssigner({
        vertex.id: _located(plan_splits(vertex, config["job.split-size"]))
        for vertex in record.graph.vertices
        if vertex.is_source and record.graph.kind is JobKind.DATAFLOW})


def fair_shares(record: JobRecord, splits: InputSplitAssigner) -> dict[str, int]:
    """Per file source vertex, a subtask's fair share of its input in bytes, which its
    deployments carry: no batch of its splits holds more, so the first subtask to ask
    does not take a small input whole. Called while every planned split is in the pool
    (before a recovered job's finished subtasks take theirs back)."""
    shares = {vertex.id: fair_share(splits.remaining(vertex.id), vertex.parallelism)
              for vertex in record.graph.vertices
              if vertex.is_source and record.graph.kind is JobKind.DATAFLOW}
    return {vertex_id: share for vertex_id, share in shares.items() if share}


def _located(splits: list[InputSplit]) -> list[InputSplit]:
    """File splits are on this host's disk: the assigner gives them to TaskManagers on
    this host only (core/node/hostidentity.py; input on a shared mount is named by a URL,
    file:///..., and goes to anyone)."""
    host = host_identity()
    return [replace(s, hosts=(host,)) if s.path and not s.hosts and not is_url(s.path)
            else s for s in splits]


def job_scheduler(graph: ExecutionGraph, record: JobRecord, config: Config,
                  splits: InputSplitAssigner, blocklist: Container[str]) -> Scheduler:
    """The job's scheduler, with the cluster's settings under the job's own restart
    settings, avoiding the slots of the TaskManagers in ``blocklist``. Raises ValueError
    (a ConfigError) for bad ones."""
    streaming = record.graph.kind is JobKind.STREAMING
    settings = config.with_overrides(record.restart_strategy or {})
    return Scheduler(
        graph, restart_strategy(settings), splits,
        failover=settings["jobmanager.execution.failover-strategy"],
        # a streaming task never ends: nothing may wait behind it in its slot
        deploy_ahead=settings["jobmanager.scheduler.deploy-ahead"] and not streaming,
        pipelined=streaming, avoid=blocklist)


def restore_finished(scheduler: Scheduler, record: JobRecord, progress: ProgressLog) -> None:
    """Put back the subtasks an earlier JobManager run of the job had finished."""
    finished = progress.read()
    try:
        scheduler.restore_finished(finished)
    except ValueError as error:
        log.warning("job %s: cannot reuse the earlier run's results (%s); running it "
                    "all again", record.job_id, error)
        return
    log.info("job %s recovered in epoch %d: %d subtasks already finished", record.job_id,
             record.epoch, len(finished))


def job_checkpoints(record: JobRecord, work_dir: Path, savepoint_root: Path | None,
                    endpoint: MainThread, tasks: Callable[[], list[CheckpointTask]],
                    tell: Callable[[str, Any], None],
                    fail: Callable[[str], None]) -> JobCheckpoints:
    """A streaming job's checkpoints, under its work dir, going on from those an earlier
    JobManager run completed (``JobCheckpoints`` says what ``tasks``, ``tell`` and
    ``fail`` are). Raises ValueError for options that make no sense, OSError when the
    folder cannot be read."""
    options = record.graph.checkpointing
    if options is None:
        raise ValueError("a streaming job needs its checkpointing options")
    storage = CheckpointStorage(checkpoints_dir(work_dir))
    savepoints = Savepoints(savepoint_root) if savepoint_root else None
    restore = record.graph.savepoint
    if restore is not None and record.epoch == 0:
        if savepoints is None:
            raise ValueError("this JobManager has no savepoint folder to restore from")
        try:  # the job's first checkpoint: a copy of the savepoint's
            savepoints.adopt(restore, record.graph, record.job_id, storage)
        except CheckpointStorageError as error:
            raise ValueError(str(error)) from None
    recovered, problems = storage.completed(record.job_id) \
        if record.epoch or restore else ([], [])
    for problem in problems:
        log.info("job %s: %s", record.job_id, problem)
    return JobCheckpoints(record.job_id, options.checked(), storage, endpoint, tasks, tell,
                          fail, recovered, savepoints, record.graph)
