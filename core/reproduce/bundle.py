"""Writing a reproduction folder for one failed attempt (folder.py has its layout).

What goes in, by the kind of job:

- a dataflow source subtask: the splits the attempt read (planned again as the JobMaster
  planned them, ``job.split-size``), each split's file copied;
- any other dataflow subtask: the result partitions it read, as the newest complete
  output of each producer subtask in the job's work dir (the attempt's deployment named
  them; the failure record does not, and a producer's newest complete output is what
  the failover deployed);
- a PySpark script: its arguments, each one that names a file copied and pointed at
  the copy; its ``--conf`` settings;
- a streaming subtask: the checkpoint it was restored from (the newest one completed
  before the attempt started; none for a first attempt), every subtask's snapshot of it,
  since the run restores the whole job there. Sinks' pending files are left out of the
  snapshots: the run writes into ``output/``, never into the job's own folder.

Runs on the caller's thread (the CLI's, or a worker of the desktop app); blocking file
work. Imports no Spark.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.checkpointing.checkpoints import CompletedCheckpoint
from clusterdeck.core.checkpointing.storage import CheckpointStorageError
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.artifact import ArtifactError, sha256_of, unpack_artifact
from clusterdeck.core.jobapi.inputsplits import plan_splits
from clusterdeck.core.protocol.checkpoints import StateHandle
from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.ids import attempt_file_stem, epoch_of, parse_attempt_id
from clusterdeck.core.protocol.jobgraph import InputSplit, JobKind, JobVertex, is_url
from clusterdeck.core.protocol.wiring import consumed_partitions
from clusterdeck.core.protocol.workdir import PARTITIONS, checkpoints_dir, partitions_dir
from clusterdeck.core.reproduce.copies import Budget, copy_file, copy_tree, write_bytes
from clusterdeck.core.reproduce.folder import (
    ARTIFACT,
    DEFAULT_MAX_INPUT_BYTES,
    INPUT,
    JOB,
    RUN_TEXT,
    STATE,
    CopiedPartition,
    Reproduction,
    ReproductionError,
    expected_failure,
    run_text,
    write_manifest,
)
from clusterdeck.core.reproduce.stored import StoredJob, chosen_failure, stored_job

SPLIT_SIZE = 64 * 1024 * 1024  # job.split-size's default, when no configuration says


def reproduce_job(config: Config, job_id: str, subtask: str | None = None,
                  attempt: int | None = None, out: Path | None = None, *,
                  max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> tuple[Path, Reproduction]:
    """Write the folder for a failed attempt of job ``job_id`` of the cluster ``config``
    names (default: its root cause's attempt, into ``./reproduce-<job>-<subtask>-a<n>``);
    what ``clusterdeck reproduce`` and the window's "Reproduce locally" both call."""
    job = stored_job(config, job_id)
    failure = chosen_failure(job, subtask, attempt)
    out = out or Path(f"reproduce-{job_id}-{failure.vertex_id}-{failure.subtask}"
                      f"-a{failure.attempt}")
    reproduction = write_reproduction(
        job, failure, out, max_input_bytes=max_input_bytes,
        spark_conf=config.spark_properties(), split_size=config["job.split-size"],
        cores=config["taskmanager.slots"])
    return out, reproduction


def write_reproduction(job: StoredJob, failure: FailureRecord, out: Path, *,
                       max_input_bytes: int, spark_conf: dict[str, str] | None = None,
                       split_size: int = SPLIT_SIZE, cores: int = 2) -> Reproduction:
    """Write the folder ``out`` (new, or empty) for ``failure``; returns its manifest.
    ``spark_conf``: the cluster's ``spark.*`` properties; ``cores``: its slots per
    TaskManager. On any error the folder is removed again."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReproductionError(f"{out} exists and is not an empty folder")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _write(job, failure, out, Budget(max_input_bytes), dict(spark_conf or {}),
                      split_size, cores)
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for entry in out.iterdir():
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        raise


def _write(job: StoredJob, failure: FailureRecord, out: Path, budget: Budget,
           spark_conf: dict[str, str], split_size: int, cores: int) -> Reproduction:
    record = job.record
    graph = record.graph
    vertex = graph.vertex(failure.vertex_id)
    (out / ARTIFACT).write_bytes(job.artifact)
    try:
        entry = unpack_artifact(job.artifact, out / JOB, record.artifact_sha256)
    except ArtifactError as error:
        raise ReproductionError(f"the job's artifact cannot be unpacked: {error}") from None
    job_files = {path.name for path in (out / JOB).rglob("*.py")}
    reproduction = Reproduction(
        job_id=record.job_id, job_name=graph.name, graph=graph, args=tuple(record.args),
        vertex_id=failure.vertex_id, subtask=failure.subtask, attempt=failure.attempt,
        attempt_id=failure.attempt_id, job_file=entry.relative_to(out).as_posix(),
        artifact_sha256=sha256_of(job.artifact),
        expected=expected_failure(failure.exception_type, failure.message,
                                  failure.traceback, job_files),
        cores=max(1, cores), spark_conf=spark_conf)
    if graph.kind is JobKind.PYSPARK_SCRIPT:
        reproduction = _script(reproduction, vertex, out, budget)
    elif graph.kind is JobKind.STREAMING:
        reproduction = _streaming(reproduction, job, failure, out, budget)
    elif vertex.is_source:
        reproduction = _splits(reproduction, vertex, failure, out, budget, split_size)
    else:
        reproduction = _partitions(reproduction, job, vertex, out, budget)
    (out / RUN_TEXT).write_text(run_text(reproduction, out), encoding="utf-8")
    write_manifest(out, reproduction)
    return reproduction


# -- a dataflow subtask's input ---------------------------------------------------------------

def _splits(reproduction: Reproduction, vertex: JobVertex, failure: FailureRecord,
            out: Path, budget: Budget, split_size: int) -> Reproduction:
    """The splits the attempt read; a file split's file copied whole (its byte range is
    cut at lines by the reader, which needs the bytes around it)."""
    planned = {split.split_id: split for split in plan_splits(vertex, split_size)}
    wanted = failure.input_splits or (
        (failure.subtask,) if vertex.operators[0].kind in (plan.SOURCE_RANGE,
                                                           plan.SOURCE_COLLECTION) else ())
    notes = list(reproduction.notes)
    missing = [split_id for split_id in wanted if split_id not in planned]
    if missing:
        raise ReproductionError(f"the attempt read splits {list(missing)[:10]}, which "
                                f"planning the input again does not give: did its files "
                                f"change since?")
    if not wanted:
        notes.append("the attempt had read no input split when it failed")
    copied: dict[str, str] = {}
    splits: list[InputSplit] = []
    for split_id in wanted:
        split = planned[split_id]
        if split.path:
            if is_url(split.path):
                raise ReproductionError(f"split {split_id} reads {split.path}: a URL is "
                                        "not copied")
            if split.path not in copied:
                name = f"{INPUT}/splits/{len(copied)}-{Path(split.path).name}"
                copied[split.path] = copy_file(Path(split.path), out, name, budget)
            split = replace(split, path=copied[split.path], hosts=())
        splits.append(split)
    return replace(reproduction, splits=tuple(splits), notes=tuple(notes))


def _partitions(reproduction: Reproduction, job: StoredJob, vertex: JobVertex, out: Path,
                budget: Budget) -> Reproduction:
    """The newest complete output of every producer subtask this subtask reads."""
    graph = job.record.graph
    inputs: list[CopiedPartition] = []
    copied: dict[str, str] = {}
    for edge in graph.inputs_of(vertex.id):
        producer = graph.vertex(edge.source)
        for producer_subtask, partition in consumed_partitions(
                edge.ship_strategy, reproduction.subtask, producer.parallelism):
            attempt_id = _newest_output(job, producer.id, producer_subtask)
            if attempt_id not in copied:
                source = partitions_dir(job.work_dir, attempt_id)
                copied[attempt_id] = copy_tree(
                    source, out, f"{INPUT}/{PARTITIONS}/{source.name}", budget)
            inputs.append(CopiedPartition(copied[attempt_id], edge.input_index, attempt_id,
                                          producer.id, producer_subtask, partition))
    return replace(reproduction, inputs=tuple(inputs))


def _newest_output(job: StoredJob, vertex_id: str, subtask: int) -> str:
    """The attempt id of the newest attempt of the producer subtask with a partitions
    folder in the work dir (epoch, then attempt number)."""
    job_id = job.record.job_id
    prefix = attempt_file_stem(f"{job_id}/{vertex_id}#{subtask}/")
    found: list[tuple[int, int, str]] = []
    folder = job.work_dir / PARTITIONS
    for entry in (os.scandir(folder) if folder.is_dir() else ()):
        if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
            continue
        parsed = parse_attempt_id(f"{job_id}/{vertex_id}#{subtask}/"
                                  f"{entry.name[len(prefix):]}")
        if parsed is not None and attempt_file_stem(str(parsed)) == entry.name:
            found.append((parsed.epoch, parsed.attempt, str(parsed)))
    if not found:
        raise ReproductionError(f"the output of {vertex_id}#{subtask}, which the attempt "
                                f"read, is no longer in the job's work dir {job.work_dir}")
    return max(found)[2]


# -- a script's arguments ----------------------------------------------------------------------

def _script(reproduction: Reproduction, vertex: JobVertex, out: Path,
            budget: Budget) -> Reproduction:
    """Arguments that name a file (from where the script was submitted) point at a copy
    in ``input/``; the script's own ``--conf`` settings join the cluster's."""
    params = vertex.operators[0].params
    cwd = str(params.get("cwd") or "")
    args: list[str] = []
    notes = list(reproduction.notes)
    for index, argument in enumerate(str(arg) for arg in params.get("args", ())):
        path = Path(cwd, argument) if cwd else Path(argument)
        if argument and not is_url(argument) and path.is_file() and not path.is_symlink():
            args.append(copy_file(path, out, f"{INPUT}/args/{index}-{path.name}", budget))
            notes.append(f"argument {index + 1} ({argument}) is a copy: {args[-1]}")
        else:
            args.append(argument)
    conf = {str(key): str(value) for key, value in dict(params.get("conf", {})).items()}
    return replace(reproduction, script_args=tuple(args), notes=tuple(notes),
                   spark_conf={**reproduction.spark_conf, **conf})


# -- a streaming subtask's restored state ------------------------------------------------------

def _streaming(reproduction: Reproduction, job: StoredJob, failure: FailureRecord,
               out: Path, budget: Budget) -> Reproduction:
    graph = job.record.graph
    kinds = {op.kind for vertex in graph.vertices for op in vertex.operators}
    if kinds & {plan.SOURCE_MQTT, plan.SINK_MQTT}:
        raise ReproductionError("the job reads or writes MQTT topics: a message stream "
                                "is not replayable, so its subtasks cannot run again here")
    cores = max(reproduction.cores, sum(v.parallelism for v in graph.vertices) + 1)
    reproduction = replace(reproduction, cores=cores)
    if failure.attempt == 0 and not epoch_of(failure.attempt_id) and graph.savepoint is None:
        return reproduction  # a first attempt starts afresh: no state to restore
    if graph.savepoint is not None and failure.attempt == 0:
        raise ReproductionError("the attempt started from a savepoint: reproducing from a "
                                "savepoint is not supported yet")
    storage = CheckpointStorage(checkpoints_dir(job.work_dir))
    checkpoint, note = restored_checkpoint(storage, job.record.job_id, failure)
    notes = (*reproduction.notes, note) if note else reproduction.notes
    if checkpoint is None:
        return replace(reproduction, notes=notes)
    states = _copy_checkpoint(storage, checkpoint, out, budget)
    return replace(reproduction, checkpoint_id=checkpoint.checkpoint_id, states=states,
                   notes=notes)


def restored_checkpoint(storage: CheckpointStorage, job_id: str, failure: FailureRecord
                   ) -> tuple[CompletedCheckpoint | None, str]:
    """The newest checkpoint completed before the attempt started: the one its
    deployment restored (the JobMaster restores the latest completed one; retention drops
    the oldest first, so if any checkpoint that old is kept, that one is). When retention
    dropped it since, the newest one the attempt itself completed before it failed: its
    state on its way to the same failure. With a note saying so."""
    completed, _problems = storage.completed(job_id)
    started = failure.start_time if failure.start_time is not None else failure.timestamp
    before = [c for c in completed if c.completed <= started]
    if before:
        return before[-1], ""
    later = [c for c in completed if started < c.completed <= failure.timestamp]
    if later:
        return later[-1], (f"the checkpoint the attempt was restored from is no longer "
                           f"kept; checkpoint {later[-1].checkpoint_id}, which the attempt "
                           f"completed before it failed, is restored instead")
    if completed:
        raise ReproductionError(
            f"the checkpoint the attempt was restored from is gone (the oldest kept is "
            f"{completed[0].checkpoint_id}): raise the job's retained checkpoints")
    return None, "no checkpoint had completed before the attempt started: it started afresh"


def _copy_checkpoint(storage: CheckpointStorage, checkpoint: CompletedCheckpoint, out: Path,
                     budget: Budget) -> dict[str, StateHandle]:
    """Every subtask's snapshot, its sink's part dropped, and the shared files it names;
    returns the new handles (their size and SHA-256 changed with the sink's part)."""
    job_id = checkpoint.job_id
    states: dict[str, StateHandle] = {}
    for subtask, handle in sorted(checkpoint.states.items()):
        try:
            data = json.loads(storage.read_state(job_id, handle))
            for shared in handle.shared:
                copy_file(storage.shared_file(job_id, shared, subtask), out,
                          f"{STATE}/{job_id}/{shared.path}", budget)
        except (CheckpointStorageError, ValueError) as error:
            raise ReproductionError(f"checkpoint {checkpoint.checkpoint_id}: the snapshot "
                                    f"of {subtask} cannot be read: {error}") from None
        if isinstance(data, dict):
            data["sink"] = None  # pending files of the job's own output folder
        body = json.dumps(data).encode()
        write_bytes(out, f"{STATE}/{job_id}/{handle.path}", body, budget)
        states[subtask] = replace(handle, size=len(body), sha256=sha256_of(body))
    return states
