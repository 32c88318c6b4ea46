"""What the Dispatcher checks before a submitted job touches the disk.

A SubmitJob is data from the network: its job id becomes a folder name, its graph is
expanded into one ExecutionVertex per subtask, its restart options configure the
JobMaster. So the id must be a plain name (``../../x`` would write outside the job store),
the graph must be one the scheduler can run (every vertex between 1 and
``jobmanager.max-parallelism`` subtasks wide, edges between known vertices, no cycle),
and the per-job options may only be restart options with finite values. A job refused
here leaves nothing behind, and the client hears why. So do a job's own restart settings
that name no strategy the JobMaster can build, and a savepoint the job cannot start from:
refused here, not found failing once the job runs.
"""

from __future__ import annotations

import math
from typing import Any

from clusterdeck.core.checkpointing import CheckpointStorageError, Savepoints
from clusterdeck.core.checkpointing.savepoints import fitting_states
from clusterdeck.core.config.settings import Config
from clusterdeck.core.executiongraph.restart import restart_strategy
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.ids import JOB_ID
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind
from clusterdeck.core.protocol.wiring import check_edge

RESTART_PREFIX = "restart-strategy."


class SubmissionRefused(ValueError):
    """The submission is not a job this cluster can store and run; nothing was kept."""


def check_submission(request: p.SubmitJob, max_parallelism: int) -> None:
    """Raise SubmissionRefused saying what is wrong with ``request``."""
    if not JOB_ID.fullmatch(request.job_id):
        raise SubmissionRefused(f"job id {request.job_id[:80]!r} is not 1-64 letters, "
                                f"digits, '_' or '-' starting with a letter or digit")
    _check_graph(request.graph, max_parallelism)
    for key, value in (request.restart_strategy or {}).items():
        if not key.startswith(RESTART_PREFIX):
            raise SubmissionRefused(f"a job may set only {RESTART_PREFIX}* options, not "
                                    f"{key[:80]!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise SubmissionRefused(f"{key} must be a finite number")
    if not (math.isfinite(request.task_timeout) and request.task_timeout >= 0):
        raise SubmissionRefused("the task timeout must be a finite number of seconds >= 0")


def check_restart_strategy(config: Config, overrides: dict[str, Any] | None) -> None:
    """Raise ValueError (a ConfigError) when the job's restart settings, over the
    cluster's, build no restart strategy."""
    restart_strategy(config.with_overrides(overrides or {}))


def check_savepoint(graph: JobGraph, savepoints: Savepoints) -> None:
    """Raise SubmissionRefused when the job cannot start from its savepoint: it reads the
    savepoint's metadata only (the state is copied when the job starts)."""
    restore = graph.savepoint
    if restore is None:
        return
    if graph.kind is not JobKind.STREAMING:
        raise SubmissionRefused("only a streaming job starts from a savepoint")
    try:
        fitting_states(savepoints.read(restore.path), graph, restore.allow_non_restored_state)
    except (CheckpointStorageError, ValueError) as error:
        raise SubmissionRefused(str(error)) from None


def _check_graph(graph: JobGraph, max_parallelism: int) -> None:
    if not graph.vertices:
        raise SubmissionRefused(f"job graph {graph.name!r} has no vertices")
    vertices = {vertex.id: vertex for vertex in graph.vertices}
    if len(vertices) != len(graph.vertices):
        raise SubmissionRefused(f"job graph {graph.name!r} repeats a vertex id")
    for vertex in graph.vertices:
        if not vertex.operators:
            raise SubmissionRefused(f"vertex {vertex.id!r} has no operators")
        if not 1 <= vertex.parallelism <= max_parallelism:
            raise SubmissionRefused(
                f"vertex {vertex.id!r} has parallelism {vertex.parallelism}: it must be "
                f"from 1 to {max_parallelism} (jobmanager.max-parallelism)")
    for edge in graph.edges:
        if edge.source not in vertices or edge.target not in vertices:
            raise SubmissionRefused(f"an edge {edge.source!r} -> {edge.target!r} names a "
                                    f"vertex the graph does not have")
        try:
            check_edge(edge, vertices[edge.source].parallelism,
                       vertices[edge.target].parallelism)
        except ValueError as error:
            raise SubmissionRefused(str(error)) from None
    try:
        graph.topological_order()
    except ValueError as error:
        raise SubmissionRefused(str(error)) from None


def check_slots(graph: JobGraph, config: Config) -> None:
    """Raise SubmissionRefused when the job needs more slots at once than the cluster can
    ever have, instead of letting it wait for ``jobmanager.slot-request-timeout``.

    Only a streaming job needs every subtask's slot at once (pipelined); a batch job runs
    its subtasks in waves on however many slots there are, and with a provider it gets
    TaskManagers started up to the maximum. The most there can ever be is known only with
    a provider (``elastic.max-taskmanagers``): without one, TaskManagers started by hand
    may join at any time."""
    if config["elastic.provider"] == "none" or graph.kind is not JobKind.STREAMING:
        return
    needed = sum(vertex.parallelism for vertex in graph.vertices)
    most = config["elastic.max-taskmanagers"] * config["taskmanager.slots"]
    if needed > most:
        raise SubmissionRefused(
            f"job {graph.name!r} needs {needed} slots at once (a streaming job runs every "
            f"subtask together) and this cluster has at most {most}: "
            f"elastic.max-taskmanagers {config['elastic.max-taskmanagers']} x "
            f"taskmanager.slots {config['taskmanager.slots']}")
