"""Submit latency: from ``JobClient.submit()`` to the job's first task RUNNING, on a warm cluster.

A LocalCluster (broker, JobManager, TaskManagers under the supervisor) runs in this
process's supervisor; a warm-up job first makes every TaskManager start its SparkSession
and load a job once. Then the same tiny job (``env.from_range(0, 10).collect()``) is
submitted N times, one after the other, each waited for to its end. Times per run:

- submit returned: ``submit()`` (load the job, pack and upload the artifact, SubmitJob);
- first RUNNING: arrival here of the first ExecutionStateEvent with ``new`` RUNNING
  (``events/jobs/<id>``, stamped on paho's network thread), from just before the call;
- the JobManager's side, from its event timestamps (its wall clock, same machine):
  SCHEDULED, DEPLOYING, RUNNING of that first task;
- result: the JobResult in hand (``JobClient.wait``).

Target: first RUNNING < 200 ms at p50 and p95.

    python -m benchmarks.submit_latency [--quick] [--runs N] [--broker auto|mosquitto|amqtt]

The helpers here (a benchmark cluster, a job-event recorder, job files written to a temp
folder) are shared by the other job benchmarks (control_plane, recovery,
wordcount_vs_pyspark).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    LoadMeter,
    child_env,
    exit_on_sigterm,
    fresh_home,
    machine_summary,
    markdown_table,
    median,
    percentile,
)
from benchmarks._observer import ClusterObserver
from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.client.localcluster import LocalCluster, taskmanager_name
from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.states import ExecutionState, JobStatus

S = ExecutionState

TINY_JOB = """\
def build(env):
    env.set_job_name("tiny")
    env.from_range(0, 10).collect(name="rows")
"""

WARMUP_JOB = """\
def build(env):
    env.set_job_name("warm-up")
    env.set_parallelism(int(env.args[0]) if env.args else 1)
    env.from_range(0, 100).collect(name="rows")
"""


# -- shared by the job benchmarks ------------------------------------------------------------


def write_job(folder: Path, name: str, source: str) -> Path:
    """A job file in ``folder`` (its own artifact: nothing else there is imported)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


class JobEvents:
    """Every message on ``events/jobs/+``, stamped with ``time.monotonic()`` on arrival.

    Subscribed before any submission, so no event of a job is missed (the job id is only
    known once ``submit`` returns). Callbacks run on paho's network thread and only append
    under the condition; queries run on the caller's thread."""

    def __init__(self, client: JobClient) -> None:
        self._log: list[tuple[float, Any]] = []
        self._condition = threading.Condition()
        client.service.subscribe(topics.JOB_EVENTS_ALL, self._record)

    def _record(self, _topic: str, message: Any) -> None:
        arrived = time.monotonic()
        with self._condition:
            self._log.extend((arrived, event) for event in p.job_events_in(message))
            self._condition.notify_all()

    def of(self, job_id: str) -> list[tuple[float, Any]]:
        with self._condition:
            return [(t, m) for t, m in self._log if getattr(m, "job_id", None) == job_id]

    def executions(self, job_id: str) -> list[p.ExecutionStateEvent]:
        return [m for _, m in self.of(job_id) if isinstance(m, p.ExecutionStateEvent)]

    def first(self, job_id: str, predicate: Callable[[Any], bool], timeout: float,
              what: str) -> tuple[float, Any]:
        deadline = time.monotonic() + timeout
        checked = 0
        with self._condition:
            while True:
                for arrived, message in self._log[checked:]:
                    if getattr(message, "job_id", None) == job_id and predicate(message):
                        return arrived, message
                checked = len(self._log)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no {what} of job {job_id} within {timeout:g} s")
                self._condition.wait(remaining)

    def forget(self, job_id: str) -> None:
        with self._condition:
            self._log = [(t, m) for t, m in self._log if getattr(m, "job_id", None) != job_id]


def is_running(event: Any) -> bool:
    return isinstance(event, p.ExecutionStateEvent) and event.new == S.RUNNING


@dataclass
class BenchCluster:
    cluster: LocalCluster
    client: JobClient
    events: JobEvents
    observer: ClusterObserver
    started_s: float        # LocalCluster.start() until every TaskManager registered
    jobs_dir: Path

    @property
    def taskmanagers(self) -> set[str]:
        return {taskmanager_name(i)
                for i in range(1, self.cluster.config["taskmanager.count"] + 1)}

    @property
    def slots(self) -> int:
        return self.cluster.config["taskmanager.count"] * self.cluster.config["taskmanager.slots"]

    def run_job(self, job_file: Path, args: tuple[str, ...] = (), timeout: float = 3600.0,
                **submit: Any) -> tuple[str, p.JobResult, float]:
        """Submit and wait: (job id, result, wall seconds from the submit call to the
        result in hand)."""
        started = time.monotonic()
        job_id = self.client.submit(job_file, args, **submit)
        result = wait_result(self.client, job_id, timeout)
        return job_id, result, time.monotonic() - started

    def warm_up(self, timeout: float = 600.0) -> float:
        """A job with one subtask per slot: every TaskManager gets a task, which waits for
        its SparkSession. Returns its wall time."""
        self.observer.wait_registered_now(self.taskmanagers, timeout)
        job = write_job(self.jobs_dir, "warmup", WARMUP_JOB)
        _, result, wall = self.run_job(job, (str(self.slots),), timeout)
        if result.status != JobStatus.FINISHED:
            raise RuntimeError(f"the warm-up job ended {result.status}: {result.root_cause}")
        return wall


def wait_result(client: JobClient, job_id: str, timeout: float) -> p.JobResult:
    """``JobClient.wait`` with a deadline (it waits forever by itself)."""
    found: list[p.JobResult] = []
    done = threading.Event()

    def waiter() -> None:
        found.append(client.wait(job_id))
        done.set()
    threading.Thread(target=waiter, daemon=True, name=f"wait-{job_id}").start()
    if not done.wait(timeout):
        raise TimeoutError(f"job {job_id} did not end within {timeout:g} s")
    return found[0]


@contextmanager
def bench_cluster(name: str, **settings: Any) -> Iterator[BenchCluster]:
    """A LocalCluster in a fresh CLUSTERDECK_HOME (2 TaskManagers x 2 slots, broker auto,
    Spark eager unless ``settings`` say otherwise), with a JobClient, a job-event
    recorder and a cluster observer; every process is stopped on the way out, also on
    failure. Waits until every TaskManager registered."""
    with fresh_home() as home:
        # The supervisor's children inherit this environment: make the repo importable.
        os.environ["PYTHONPATH"] = child_env()["PYTHONPATH"]
        config = Config({"cluster.id": f"bench-{name}-{uuid.uuid4().hex[:6]}",
                         "taskmanager.count": 2, "taskmanager.slots": 2,
                         "broker.kind": "auto", "spark.start": "eager", **settings})
        cluster = LocalCluster(config)
        client = observer = None
        try:
            started = time.monotonic()
            cluster.start()
            client = JobClient(cluster.config, connect_timeout=30.0)
            events = JobEvents(client)
            observer = ClusterObserver(cluster.broker_address(), cluster.cluster_id)
            bench = BenchCluster(cluster, client, events, observer, 0.0, home / "jobs")
            observer.wait_registered_now(bench.taskmanagers, 120.0)
            client.leader(30.0)
            bench.started_s = time.monotonic() - started
            yield bench
        finally:
            for closable in (observer, client):
                if closable is not None:
                    closable.close()
            cluster.stop()


def load_now() -> str:
    return " / ".join(f"{v:.1f}" for v in os.getloadavg())


# -- this benchmark ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Submission:
    returned_ms: float      # submit() returned
    running_ms: float       # first RUNNING event arrived here
    scheduled_jm_ms: float  # the JobManager's timestamps of that task, from the call
    deploying_jm_ms: float
    running_jm_ms: float
    result_ms: float        # JobResult in hand
    load: float


def one_submission(bench: BenchCluster, job: Path) -> Submission:
    load = os.getloadavg()[0]
    wall, started = time.time(), time.monotonic()
    job_id = bench.client.submit(job)
    returned = time.monotonic()
    arrived, event = bench.events.first(job_id, is_running, 60.0, "RUNNING event")
    result = wait_result(bench.client, job_id, 120.0)
    done = time.monotonic()
    if result.status != JobStatus.FINISHED:
        raise RuntimeError(f"job {job_id} ended {result.status}: {result.root_cause}")
    states = {e.new: e.at for e in bench.events.executions(job_id)
              if e.attempt_id == event.attempt_id}
    bench.events.forget(job_id)

    def jm(state: ExecutionState) -> float:
        return 1000 * (states[state] - wall) if state in states else float("nan")
    return Submission(1000 * (returned - started), 1000 * (arrived - started), jm(S.SCHEDULED),
                      jm(S.DEPLOYING), jm(S.RUNNING), 1000 * (done - started), load)


def measure(runs: int, broker: str) -> tuple[list[Submission], str, float, float]:
    meter = LoadMeter()
    with bench_cluster("submit", **{"broker.kind": broker}) as bench:
        warm_up = bench.warm_up()
        job = write_job(bench.jobs_dir, "tiny", TINY_JOB)
        one_submission(bench, job)  # this client's first submit: imports, first upload
        results = []
        for index in range(runs):
            result = one_submission(bench, job)
            print(f"  run {index + 1}: first RUNNING after {result.running_ms:.1f} ms "
                  f"(submit returned {result.returned_ms:.1f} ms; load {result.load:.1f})",
                  file=sys.stderr)
            results.append(result)
        kind = bench.cluster.broker_kind
    return results, meter.stop().describe(), warm_up, kind  # type: ignore[return-value]


def report(results: list[Submission], load: str, warm_up: float, kind: str) -> str:
    def stats(values: list[float]) -> tuple[str, str, str, str]:
        return (f"{median(values):.1f}", f"{percentile(values, 0.95):.1f}",
                f"{min(values):.1f}", f"{max(values):.1f}")
    running = [r.running_ms for r in results]
    p50, p95 = median(running), percentile(running, 0.95)
    met = "met" if p50 < 200 and p95 < 200 else "missed"
    rows = [
        ("submit() returned (load, pack, upload, SubmitJob)",
         *stats([r.returned_ms for r in results])),
        ("JobManager: task SCHEDULED", *stats([r.scheduled_jm_ms for r in results])),
        ("JobManager: task DEPLOYING (slot offered)",
         *stats([r.deploying_jm_ms for r in results])),
        ("JobManager: task RUNNING (TaskManager reported)",
         *stats([r.running_jm_ms for r in results])),
        ("**first RUNNING event arrived here**", *stats(running)),
        ("JobResult in hand", *stats([r.result_ms for r in results])),
    ]
    loads = [r.load for r in results]
    return "\n".join([
        f"Machine: {machine_summary()}.",
        f"Broker {kind}; 2 TaskManagers x 2 slots, spark.start eager; warm-up job "
        f"{warm_up:.1f} s; {len(results)} submissions of `from_range(0, 10).collect()`, one "
        f"after the other. Milliseconds from just before `submit()`.",
        "",
        markdown_table(["step", "p50", "p95", "min", "max"], rows),
        "",
        f"Target (first RUNNING < 200 ms): p50 {p50:.1f} ms, p95 {p95:.1f} ms: **{met}**. "
        f"CPU busy / load during the run: {load}; 1-minute load at each submission "
        f"{min(loads):.1f}-{max(loads):.1f}.",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.submit_latency",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 submissions instead of 20")
    parser.add_argument("--runs", type=int, help="submissions (default 20, quick 5)")
    parser.add_argument("--broker", default="auto",
                        choices=["auto", "mosquitto", "amqtt"], help="broker kind (auto)")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    runs = args.runs or (5 if args.quick else 20)
    results, load, warm_up, kind = measure(runs, args.broker)
    print(report(results, load, warm_up, kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
