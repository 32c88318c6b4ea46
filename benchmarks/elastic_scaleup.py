"""Scale-up: from a slot request beyond the cluster's capacity to the task running on a
TaskManager the active ResourceManager started for it (docs/elastic.md).

One local cluster (``elastic.provider local``, min 1, max 2 TaskManagers of one slot, a
short idle timeout) serves every run. A run first submits a job that holds the only slot
until the run ends (it waits for a file), then a one-subtask job, whose slot request
finds no free slot; the timestamps, all of this machine's wall clock, come from the
cluster itself:

- requested: the second job's subtask SCHEDULED (its JobMaster asks for a slot then);
- decided: ``taken_at`` of the first ``TaskManagerDemand`` that asks for a TaskManager;
- registered: the new TaskManager's ``registered_at`` (its process started, connected and
  registered);
- deploying / running: the subtask's moves on the new TaskManager (running includes its
  wait for the TaskManager's SparkSession, which starts at its start with ``spark.start
  eager``, at its first task with ``lazy``).

Between runs the cluster waits until the extra TaskManager was stopped again.

    python -m benchmarks.elastic_scaleup [--runs N] [--spark-start eager lazy]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    LoadMeter,
    exit_on_sigterm,
    fresh_home,
    machine_summary,
    markdown_table,
    median,
)
from clusterdeck.core.client.jobclient import JobClient, new_job_id
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics

HOLDER = ("import os, time\n"
          "def hold(x, release):\n"
          "    while not os.path.exists(release):\n"
          "        time.sleep(0.05)\n"
          "    return x\n"
          "def build(env):\n"
          "    release = env.args[0]\n"
          "    env.set_parallelism(1)\n"
          "    env.from_range(0, 1).map(lambda x: hold(x, release)).collect()\n")
JOB = ("def build(env):\n"
       "    env.set_parallelism(1)\n"
       "    env.from_range(0, 1).map(lambda x: x + 1).collect()\n")
PHASES = ("request → decision", "decision → registered", "registered → deploying",
          "deploying → running", "request → running")


class Timeline:
    """What the cluster published, as it arrived (paho's thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.demands: list[p.TaskManagerDemand] = []
        self.registered: dict[str, float] = {}
        self.moves: list[p.ExecutionStateEvent] = []
        self.live: set[str] = set()
        self.busy = 0  # slots taken in the latest overview

    def on_demand(self, _topic: str, demand: object) -> None:
        if isinstance(demand, p.TaskManagerDemand):
            with self.lock:
                self.demands.append(demand)

    def on_cluster(self, _topic: str, overview: object) -> None:
        if isinstance(overview, p.ClusterOverview):
            with self.lock:
                self.live = {t.id for t in overview.taskmanagers
                             if t.state is p.TaskManagerState.REGISTERED}
                self.busy = overview.slots_total - overview.slots_free
                for info in overview.taskmanagers:
                    if info.state is p.TaskManagerState.REGISTERED:
                        self.registered[info.id] = info.registered_at

    def busy_slots(self) -> int:
        with self.lock:
            return self.busy

    def on_job(self, _topic: str, event: object) -> None:
        if isinstance(event, p.ExecutionStateEvents):
            with self.lock:
                self.moves.extend(event.events)


def wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:g} s")
        time.sleep(0.02)


def one_run(client: JobClient, timeline: Timeline, work: Path, run: int) -> list[float]:
    release = work / f"release-{run}"
    holder = client.submit(work / "holder.py", [str(release)])
    wait(lambda: timeline.busy_slots(), 120, "the holder job in the only slot")
    with timeline.lock:
        timeline.moves.clear()
        demands_before = len(timeline.demands)
        before = set(timeline.live)
    job_id = new_job_id()
    client.service.subscribe(topics.job_events(job_id), timeline.on_job)  # before it runs
    client.submit(work / "job.py", [], job_id=job_id)
    result = client.wait(job_id)
    release.touch()
    assert result.status is p.JobStatus.FINISHED, result.root_cause
    assert client.wait(holder).status is p.JobStatus.FINISHED
    with timeline.lock:
        moves = list(timeline.moves)
        # The first demand for a TaskManager beyond those running when the run began (a
        # late copy of the minimum's demand may arrive first).
        demand = next(d for d in timeline.demands[demands_before:] if set(d.starts) - before)
        new_tm = min(set(demand.starts) - before)
        registered = timeline.registered[new_tm]
    on_new = [m for m in moves if m.taskmanager_id == new_tm]
    scheduled = next(m.at for m in moves if m.new is p.ExecutionState.SCHEDULED)
    deploying = next(m.at for m in on_new if m.new is p.ExecutionState.DEPLOYING)
    running = next(m.at for m in on_new if m.new is p.ExecutionState.RUNNING)
    return [demand.taken_at - scheduled, registered - demand.taken_at,
            deploying - registered, running - deploying, running - scheduled]


def measure(spark_start: str, runs: int, work: Path) -> list[list[float]]:
    config = Config({"cluster.id": f"bench-elastic-{spark_start}", "taskmanager.slots": 1,
                     "elastic.provider": "local", "elastic.min-taskmanagers": 1,
                     "elastic.max-taskmanagers": 2, "elastic.idle-timeout": 1.0,
                     "heartbeat.interval": 0.2, "spark.start": spark_start})
    (work / "holder.py").write_text(HOLDER)
    (work / "job.py").write_text(JOB)
    timeline = Timeline()
    samples = []
    with LocalCluster(config) as cluster:
        cluster.start()
        cluster.wait_for_taskmanagers(1, timeout=120)
        with JobClient(cluster.config, connect_timeout=30) as client:
            client.service.subscribe(topics.TASKMANAGER_DEMAND, timeline.on_demand)
            client.service.subscribe(topics.CLUSTER_STATE, timeline.on_cluster)
            for run in range(runs):
                wait(lambda: len(timeline.live) == 1, 120, "cluster back to one TaskManager")
                samples.append(one_run(client, timeline, work, run))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spark-start", nargs="+", default=["eager", "lazy"],
                        choices=["eager", "lazy"])
    args = parser.parse_args()
    exit_on_sigterm()
    print(machine_summary())
    rows = []
    for spark_start in args.spark_start:
        with fresh_home() as home:
            load = LoadMeter()
            samples = measure(spark_start, args.runs, home)
            load.stop()
        for phase, values in zip(PHASES, zip(*samples, strict=True), strict=True):
            rows.append([spark_start, phase, f"{median(values):.2f}",
                         " ".join(f"{v:.2f}" for v in values), load.describe()])
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.runs} runs each")
    print(markdown_table(["spark.start", "phase", "median s", "runs s",
                          "CPU busy / load avg"], rows))


if __name__ == "__main__":
    main()
