"""``clusterdeck rescale``: a running streaming job moved to another parallelism in one
step, as Flink's stop-with-savepoint and resubmission do: a savepoint taken as the job
stops, the job FINISHED (its sinks committed), the same job file submitted again from the
savepoint at the new parallelism, and the new job running. Each step is reported as it
ends, with the seconds since the start.

The job file comes from the caller: the JobManager never loads a job's code (it has no
Spark, and a job's graph is built where it is submitted), so the client builds the graph
again at the new parallelism. ``parallelism`` is the job's default parallelism, as
``submit -p``: a job whose ``build`` calls ``env.set_parallelism`` keeps that one.

On the caller's thread; it blocks until the new job runs or a step failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.protocol.checkpoints import SavepointRestore
from clusterdeck.core.protocol.jobevents import JobSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus


class RescaleFailed(RuntimeError):
    """A step of the rescale did not happen; the message says which and what is left."""


@dataclass(frozen=True)
class Rescaled:
    """The new job, the savepoint it started from, and when each step ended (seconds
    from the start): savepoint written, old job finished, new job running."""

    job_id: str
    savepoint: str
    savepoint_taken: float
    stopped: float
    running: float


def rescale(client: JobClient, job_id: str, parallelism: int, job_file: Path,
            args: Sequence[str] = (), *, timeout: float = 660.0,
            report: Callable[[str], None] = lambda _line: None) -> Rescaled:
    started = time.monotonic()

    def since() -> float:
        return time.monotonic() - started

    report(f"taking a savepoint of job {job_id} as it stops")
    done = client.savepoint(job_id, stop=True, savepoint=True, timeout=timeout)
    taken = since()
    report(f"[{taken:.1f} s] savepoint {done.path} (checkpoint {done.checkpoint_id}); "
           f"waiting for job {job_id} to finish")
    result = client.wait(job_id)
    if result.status is not JobStatus.FINISHED:
        raise RescaleFailed(f"job {job_id} ended {result.status} after its savepoint; "
                            f"resubmit it with --from-savepoint {done.path}")
    stopped = since()
    report(f"[{stopped:.1f} s] job {job_id} finished; submitting it at parallelism "
           f"{parallelism} from the savepoint")
    new_id = client.submit(job_file, args, parallelism=parallelism,
                           savepoint=SavepointRestore(done.path))
    deadline = time.monotonic() + timeout
    while True:
        snapshot = client.snapshot(new_id, 1.0)
        status = snapshot.graph.status if snapshot is not None else None
        if snapshot is not None and all_running(snapshot):
            break
        if status is not None and status.is_terminal:
            raise RescaleFailed(f"the new job {new_id} ended {status} before it ran: "
                                f"clusterdeck failures {new_id}")
        if time.monotonic() > deadline:
            raise RescaleFailed(f"the new job {new_id} was not running within {timeout:g} s "
                                f"(a streaming job needs a slot per subtask of every vertex)")
        time.sleep(0.1)
    running = since()
    report(f"[{running:.1f} s] job {new_id} runs at parallelism {parallelism}")
    return Rescaled(new_id, done.path, taken, stopped, running)


def all_running(snapshot: JobSnapshot) -> bool:
    """Every subtask of the job RUNNING (its state restored, its records flowing)."""
    graph = snapshot.graph
    return graph.status is JobStatus.RUNNING and all(
        vertex.state_counts.get(ExecutionState.RUNNING, 0) == vertex.parallelism
        for vertex in graph.vertices)
