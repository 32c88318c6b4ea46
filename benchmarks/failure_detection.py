"""Failure detection: from a TaskManager's kill -9 or SIGSTOP to the cluster showing it lost.

For each broker kind and each heartbeat setting a LocalCluster (broker, JobManager, two
TaskManagers under the supervisor) runs in this process; an observer follows the
retained ``state/cluster`` snapshot and ``events/cluster`` and stamps every arrival.

- kill -9: the broker publishes the TaskManager's last will (retained presence), the
  ResourceManager marks it lost. Target: < 1 s. The supervisor restarts it; the next
  trial waits until it registered again.
- SIGSTOP: the process hangs with its socket open, so only heartbeats can tell. Target:
  <= heartbeat.timeout + heartbeat.interval. Then SIGCONT, and the same process must
  register again.

Times are measured from just before ``os.kill`` to (1) the JobManager's TaskManagerLost
event (its own clock: when it decided), (2) that event arriving here, (3) the first
snapshot arriving here that shows the TaskManager lost.

    python -m benchmarks.failure_detection [--quick] [--kinds mosquitto amqtt]
        [--settings default fast] [--spark-start lazy|eager]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import (
    LoadMeter,
    child_env,
    exit_on_sigterm,
    fresh_home,
    kinds_to_run,
    machine_summary,
    markdown_table,
    median,
)
from benchmarks._observer import EVENT, STATE, ClusterObserver, taskmanager_in
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol import messages as p

TASKMANAGERS = ("taskmanager-1", "taskmanager-2")
SETTINGS = {"default": (1.0, 6.0), "fast": (0.2, 1.5)}  # (interval, timeout) in seconds
FAULTS = {"kill -9": signal.SIGKILL, "SIGSTOP": signal.SIGSTOP}


@dataclass(frozen=True)
class Trial:
    kind: str
    setting: str
    fault: str
    victim: str
    decided_s: float       # kill -> the JobManager's TaskManagerLost.at (wall clocks)
    event_s: float         # kill -> that event arrived here
    snapshot_s: float      # kill -> first snapshot here showing the TaskManager lost
    detected_by: str
    recovered_s: float     # kill (or SIGCONT) -> snapshot with both registered again


def target_s(fault: str, interval: float, timeout: float) -> float:
    return 1.0 if fault == "kill -9" else timeout + interval


def settle(observer: ClusterObserver, interval: float, phases: random.Random) -> None:
    """Both registered and two more heartbeat rounds seen, so a fault never lands on a
    registration still in progress; then a random part of an interval, so the fault does
    not always fall just after the JobManager's heartbeat round (which would round every
    SIGSTOP result to whole intervals)."""
    observer.wait_registered_now(set(TASKMANAGERS), 60.0)
    for _ in range(2):
        observer.first(STATE, lambda _o: True, time.monotonic(), 10 * interval + 5,
                       "a snapshot")
    time.sleep(phases.uniform(0.0, interval))


def inject(cluster: LocalCluster, observer: ClusterObserver, kind: str, setting: str,
           fault: str, victim: str, phases: random.Random) -> Trial:
    interval, timeout = SETTINGS[setting]
    settle(observer, interval, phases)
    pid = cluster.supervisor.info(victim).pid
    assert pid is not None, f"{victim} is not running"
    limit = timeout + interval + 15.0
    wall_start, start = time.time(), time.monotonic()
    os.kill(pid, FAULTS[fault])
    try:
        event_at, event = observer.first(
            EVENT, lambda e: isinstance(e, p.TaskManagerLost) and e.resource_id == victim,
            start, limit, f"TaskManagerLost for {victim}")
        snapshot_at, _ = observer.first(
            STATE, lambda o: (t := taskmanager_in(o, victim)) is not None
            and t.state is p.TaskManagerState.LOST, start, limit,
            f"snapshot with {victim} lost")
    finally:
        if fault == "SIGSTOP":
            os.kill(pid, signal.SIGCONT)
    resumed = time.monotonic()
    observer.wait_registered_now(set(TASKMANAGERS), 60.0)
    recovered = time.monotonic() - (resumed if fault == "SIGSTOP" else start)
    if fault == "SIGSTOP" and cluster.supervisor.info(victim).pid != pid:
        raise AssertionError(f"{victim} was restarted instead of coming back after SIGCONT")
    return Trial(kind, setting, fault, victim, event.at - wall_start, event_at - start,
                 snapshot_at - start, event.detected_by, recovered)


def measure(kind: str, setting: str, repetitions: int,
            spark_start: str) -> tuple[list[Trial], str]:
    interval, timeout = SETTINGS[setting]
    config = Config({"cluster.id": f"bench-fd-{kind}-{setting}", "broker.kind": kind,
                     "taskmanager.count": len(TASKMANAGERS), "taskmanager.slots": 2,
                     "heartbeat.interval": interval, "heartbeat.timeout": timeout,
                     "spark.start": spark_start})
    cluster = LocalCluster(config)
    observer = None
    trials: list[Trial] = []
    meter = LoadMeter()
    phases = random.Random(f"{kind}-{setting}")  # the same fault phases on every run
    try:
        cluster.start()
        observer = ClusterObserver(cluster.broker_address(), cluster.cluster_id)
        for fault in FAULTS:
            for repetition in range(repetitions):
                victim = TASKMANAGERS[repetition % len(TASKMANAGERS)]
                trial = inject(cluster, observer, kind, setting, fault, victim, phases)
                print(f"  {kind} {setting} {fault} {victim}: lost seen after "
                      f"{trial.snapshot_s:.3f} s ({trial.detected_by}); back after "
                      f"{trial.recovered_s:.2f} s", file=sys.stderr)
                trials.append(trial)
    finally:
        if observer is not None:
            observer.close()
        cluster.stop()
    return trials, meter.stop().describe()


def report(results: list[tuple[list[Trial], str]], repetitions: int, spark_start: str) -> str:
    rows = []
    for trials, load in results:
        groups: dict[tuple[str, str, str], list[Trial]] = {}
        for trial in trials:
            groups.setdefault((trial.kind, trial.setting, trial.fault), []).append(trial)
        for (kind, setting, fault), group in groups.items():
            interval, timeout = SETTINGS[setting]
            target = target_s(fault, interval, timeout)
            seen = [t.snapshot_s for t in group]
            within = max(seen) < target if fault == "kill -9" else max(seen) <= target
            met = "met" if within else "missed"
            rows.append((
                kind, f"{interval:g} s / {timeout:g} s", fault,
                ", ".join(sorted({t.detected_by for t in group})),
                ", ".join(f"{t.decided_s:.3f}" for t in group),
                ", ".join(f"{s:.3f}" for s in seen),
                f"{median(seen):.3f} / {max(seen):.3f}",
                f"{'<' if fault == 'kill -9' else '<='} {target:g} s: {met}",
                f"{median([t.recovered_s for t in group]):.2f}", load))
    return "\n".join([
        f"Machine: {machine_summary()}.",
        f"{repetitions} repetition(s) per fault, alternating taskmanager-1 and -2; "
        f"spark.start = {spark_start}; times in seconds from just before os.kill.",
        "",
        markdown_table(["broker", "heartbeat interval / timeout", "fault", "detected by",
                        "JobManager decided (s, each run)", "snapshot seen (s, each run)",
                        "snapshot seen median / max", "target", "back registered (median s)",
                        "CPU busy / load"], rows),
        "",
        "JobManager decided: TaskManagerLost.at (its wall clock) minus the wall-clock time "
        "of the kill. Snapshot seen: arrival here of the first state/cluster snapshot "
        "showing the TaskManager lost. Back registered: from the kill (kill -9: supervisor "
        "restart + registration) or from SIGCONT (SIGSTOP) to a snapshot with both "
        "TaskManagers registered. CPU busy / load: whole machine during that cluster's "
        "trials, other people's work included.",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.failure_detection",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repetition per fault")
    parser.add_argument("--kinds", nargs="+", choices=["mosquitto", "amqtt"],
                        help="broker kinds (default: both)")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS),
                        help="heartbeat settings (default: both)")
    parser.add_argument("--spark-start", choices=["lazy", "eager"], default="lazy",
                        help="lazy (default): no JVM per TaskManager, the control plane "
                        "alone; eager: each (re)started TaskManager starts its SparkSession")
    args = parser.parse_args(argv)
    repetitions = 1 if args.quick else 3
    exit_on_sigterm()
    results = []
    with fresh_home():
        # The supervisor's children inherit this environment: make the repo importable.
        os.environ["PYTHONPATH"] = child_env()["PYTHONPATH"]
        for kind in kinds_to_run(args.kinds):
            for setting in args.settings or list(SETTINGS):
                results.append(measure(kind, setting, repetitions, args.spark_start))
    print(report(results, repetitions, args.spark_start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
