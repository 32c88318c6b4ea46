"""Recovery: what one TaskManager kill -9 (or hang) mid-job costs a word count.

On a warm LocalCluster (2 TaskManagers x 2 slots, broker auto, Spark eager, default
heartbeats 1 s / 6 s, default restart strategy: fixed delay 1 s, region failover) the
word count of ``wordcount_vs_pyspark`` (``read_text -> flat_map(split) -> map((w, 1))
-> key_by(0).sum(1) -> collect``, parallelism 2) runs over ~130 MB of generated text (two
input splits of ~64 MiB, one per source subtask), in pairs, in the same run:

- undisturbed;
- disturbed: once the source subtask 0 has run for ``--at`` (default 0.5) of the time
  the same subtask took undisturbed, its TaskManager gets SIGKILL. The supervisor starts
  it again; the lost attempt runs again elsewhere. Before the next pair both
  TaskManagers must be registered and a warm-up job has waited for their Spark.

Extra time = disturbed JobResult.duration - undisturbed. Lost work = the killed
attempt's runtime until the kill (its RUNNING event to the kill). The victim is the
source subtask that ran longer undisturbed (splits are pulled: with one split each both
run about as long). Target: extra <= lost
work + 2 s. Detection delay = the JobManager's TaskManagerLost timestamp - the kill.

Then the same with SIGSTOP (a hang: only heartbeats can tell), SIGCONT once the
TaskManager was declared lost: detection delay and extra time.

    python -m benchmarks.recovery [--quick] [--pairs N] [--hangs N] [--size-mb N] [--at F]
        [--split-mb N] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import exit_on_sigterm, machine_summary, markdown_table, median
from benchmarks._observer import EVENT, STATE, taskmanager_in
from benchmarks.submit_latency import BenchCluster, bench_cluster, wait_result, write_job
from benchmarks.wordcount_vs_pyspark import WORDCOUNT_JOB, Dataset, check_counts, dataset
from clusterdeck.core.client.jobclient import collected_rows
from clusterdeck.core.config import paths
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import ExecutionState, JobStatus

S = ExecutionState

SOURCE = "vertex-1"
FLINK = "Flink defaults (heartbeat.interval 10 s, heartbeat.timeout 50 s)"


@dataclass
class Run:
    kind: str                 # undisturbed, SIGKILL, SIGSTOP
    duration_s: float
    wall_s: float
    load: float
    counts_ok: str
    source_runtime_s: float   # RUNNING -> FINISHED of the first attempt of vertex-1#0
    victim: str = ""
    lost_work_s: float = 0.0          # RUNNING of the victim attempt -> the fault
    decided_s: float = 0.0            # fault -> TaskManagerLost.at (JobManager's clock)
    seen_s: float = 0.0               # fault -> TaskManagerLost arrived here
    detected_by: str = ""
    failed_s: float = 0.0             # fault -> victim attempt FAILED
    redeployed_s: float = 0.0         # fault -> new attempt DEPLOYING
    new_runtime_s: float = 0.0        # RUNNING -> FINISHED of the new attempt
    new_taskmanager: str = ""
    source_done_s: float = 0.0        # job start -> last FINISHED of vertex-1
    consumers: str = ""               # vertex-4 attempts: RUNNING -> FINISHED s [TaskManager]
    victim_subtask: int = 0
    back_registered_s: float = float("nan")   # fault -> victim registered again
    spark_ready_s: float = float("nan")       # fault -> victim's new SparkSession started


def _attempt_times(events: list[p.ExecutionStateEvent], subtask: int,
                   attempt: int) -> dict[ExecutionState, p.ExecutionStateEvent]:
    return {e.new: e for e in events
            if e.vertex_id == SOURCE and e.subtask == subtask and e.attempt == attempt}


def _consumers(events: list[p.ExecutionStateEvent]) -> str:
    running = {e.attempt_id: e for e in events if e.vertex_id != SOURCE and e.new == S.RUNNING}
    parts = []
    for event in sorted((e for e in events if e.vertex_id != SOURCE and e.new == S.FINISHED),
                        key=lambda e: e.subtask):
        start = running.get(event.attempt_id)
        if start is not None:
            parts.append(f"{event.at - start.at:.1f} [{(start.taskmanager_id or '?')[-1]}]")
    return ", ".join(parts)


def _spark_started_after(cluster_id: str, taskmanager: str, after_wall: float) -> float | None:
    """Wall time of the first "SparkSession started" line in the TaskManager's log after
    ``after_wall`` (log times are local, millisecond resolution)."""
    log = paths.cluster_log_dir(cluster_id) / f"{taskmanager}.log"
    if not log.is_file():
        return None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if "SparkSession started" not in line:
            continue
        try:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            continue
        if stamp >= after_wall:
            return stamp
    return None


def _source_done(events: list[p.ExecutionStateEvent]) -> float:
    start = min(e.at for e in events)
    return max(e.at for e in events if e.vertex_id == SOURCE and e.new == S.FINISHED) - start


def run_undisturbed(bench: BenchCluster, job: Path, data: Dataset) -> Run:
    load = os.getloadavg()[0]
    job_id, result, wall = bench.run_job(job, (str(data.path), "2"))
    if result.status != JobStatus.FINISHED:
        raise RuntimeError(f"job {job_id} ended {result.status}: {result.root_cause}")
    events = bench.events.executions(job_id)
    runtimes = [_attempt_times(events, subtask, 0) for subtask in (0, 1)]
    runtime = [t[S.FINISHED].at - t.get(S.RUNNING, t[S.DEPLOYING]).at for t in runtimes]
    longest = 0 if runtime[0] >= runtime[1] else 1
    run = Run("undisturbed", result.duration or 0.0, wall, load,
              check_counts(data.counts, dict(collected_rows(result))), runtime[longest],
              source_done_s=_source_done(events), consumers=_consumers(events),
              victim_subtask=longest)
    bench.events.forget(job_id)
    return run


def run_disturbed(bench: BenchCluster, job: Path, data: Dataset, fault: int,
                  after_s: float, subtask: int) -> Run:
    """Fault the TaskManager of source subtask ``subtask`` after it ran ``after_s``; if
    that attempt finished already (splits are pulled, so the busier subtask can change
    between runs), the other source subtask's TaskManager if it still runs."""
    load = os.getloadavg()[0]
    started = time.monotonic()
    job_id = bench.client.submit(job, (str(data.path), "2"))
    _, running = bench.events.first(
        job_id, lambda e: isinstance(e, p.ExecutionStateEvent) and e.vertex_id == SOURCE
        and e.subtask == subtask and e.attempt == 0 and e.new == S.RUNNING, 600.0,
        f"RUNNING of vertex-1#{subtask}")
    time.sleep(max(0.0, running.at + after_s - time.time()))
    events = bench.events.executions(job_id)
    if S.FINISHED in _attempt_times(events, subtask, 0):
        subtask = 1 - subtask
        states = _attempt_times(events, subtask, 0)
        if S.RUNNING not in states or S.FINISHED in states:
            raise RuntimeError("both source subtasks finished before the fault: smaller --at")
        running = states[S.RUNNING]
    victim = running.taskmanager_id
    assert victim is not None
    pid = bench.cluster.supervisor.info(victim).pid
    assert pid is not None
    fault_wall, fault_at = time.time(), time.monotonic()
    os.kill(pid, fault)
    try:
        seen_at, lost = bench.observer.first(
            EVENT, lambda e: isinstance(e, p.TaskManagerLost) and e.resource_id == victim,
            fault_at, 120.0, f"TaskManagerLost of {victim}")
    finally:
        if fault == signal.SIGSTOP:
            os.kill(pid, signal.SIGCONT)
    back = float("nan")
    if fault == signal.SIGKILL:
        back = bench.observer.first(
            STATE, lambda o: (t := taskmanager_in(o, victim)) is not None
            and t.state is p.TaskManagerState.REGISTERED, seen_at, 120.0,
            f"{victim} registered again")[0] - fault_at
    result = wait_result(bench.client, job_id, 3600.0)
    wall = time.monotonic() - started
    spark_at = _spark_started_after(bench.cluster.cluster_id, victim, fault_wall)
    if result.status != JobStatus.FINISHED:
        raise RuntimeError(f"job {job_id} ended {result.status}: {result.root_cause}")
    events = bench.events.executions(job_id)
    first = _attempt_times(events, subtask, 0)
    second = _attempt_times(events, subtask, 1)
    run = Run(
        "SIGKILL" if fault == signal.SIGKILL else "SIGSTOP", result.duration or 0.0, wall,
        load, check_counts(data.counts, dict(collected_rows(result))),
        float("nan"), victim, fault_wall - running.at, lost.at - fault_wall,
        seen_at - fault_at, lost.detected_by,
        first[S.FAILED].at - fault_wall if S.FAILED in first else float("nan"),
        second[S.DEPLOYING].at - fault_wall if S.DEPLOYING in second else float("nan"),
        (second[S.FINISHED].at - second[S.RUNNING].at) if {S.RUNNING, S.FINISHED} <= set(second)
        else float("nan"),
        second[S.DEPLOYING].taskmanager_id or "" if S.DEPLOYING in second else "",
        _source_done(events), _consumers(events), subtask, back,
        spark_at - fault_wall if spark_at is not None else float("nan"))
    bench.events.forget(job_id)
    return run


def settle(bench: BenchCluster) -> float:
    """Both TaskManagers registered again, and their Spark up (a warm-up job waits)."""
    bench.observer.wait_registered_now(bench.taskmanagers, 120.0)
    return bench.warm_up()


def report(data: Dataset, pairs: list[tuple[Run, Run]], hangs: list[tuple[Run, Run]],
           at: float, load: str, kind: str) -> str:
    rows = []
    for index, (calm, hit) in enumerate(pairs + hangs, 1):
        extra = hit.duration_s - calm.duration_s
        budget = hit.lost_work_s + 2.0
        verdict = ("met" if extra <= budget else "missed") if hit.kind == "SIGKILL" else "-"
        rows.append((index, hit.kind, f"{calm.duration_s:.1f}", f"{hit.duration_s:.1f}",
                     f"**{extra:+.1f}**", f"{hit.lost_work_s:.1f}",
                     f"{extra - hit.lost_work_s:+.1f}", verdict,
                     f"{calm.load:.1f} / {hit.load:.1f}",
                     "ok" if calm.counts_ok == hit.counts_ok == "identical" else
                     f"{calm.counts_ok} / {hit.counts_ok}"))
    timeline = []
    for index, (calm, hit) in enumerate(pairs + hangs, 1):
        timeline.append((index, hit.kind, f"{hit.victim} (vertex-1#{hit.victim_subtask})",
                         f"{hit.decided_s:.3f}", f"{hit.seen_s:.3f}", hit.detected_by,
                         f"{hit.failed_s:.3f}", f"{hit.redeployed_s:.2f}", hit.new_taskmanager,
                         f"{hit.back_registered_s:.1f}", f"{hit.spark_ready_s:.1f}",
                         f"{calm.source_runtime_s:.1f}", f"{hit.new_runtime_s:.1f}",
                         f"{calm.source_done_s:.1f} / {hit.source_done_s:.1f}",
                         f"{calm.consumers} / {hit.consumers}"))
    kills = [h.decided_s for _, h in pairs]
    stops = [h.decided_s for _, h in hangs]
    detection = []
    if kills:
        detection.append(("kill -9", f"{median(kills):.3f} (max {max(kills):.3f})",
                          "last will", "~10-20 s (2 failed heartbeat RPCs, "
                          "`heartbeat.rpc-failure-threshold` 2) up to 50 s"))
    if stops:
        detection.append(("SIGSTOP (hang)", f"{median(stops):.3f} (max {max(stops):.3f})",
                          "heartbeat timeout", "50 s (`heartbeat.timeout`)"))
    return "\n".join([
        f"Machine: {machine_summary()}.",
        f"Broker {kind}; 2 TaskManagers x 2 slots, spark.start eager, heartbeats 1 s / 6 s, "
        f"restart strategy fixed-delay (1 s), region failover. Input {data.bytes / 1e6:.0f} MB "
        f"({data.words:,} words), parallelism 2. Fault when the victim source subtask had run "
        f"{at:g} x its undisturbed runtime. CPU busy / load of the whole run: {load}.",
        "",
        markdown_table(["pair", "fault", "undisturbed duration (s)", "disturbed duration (s)",
                        "extra (s)", "lost work (s)", "extra - lost work (s)",
                        "target extra <= lost + 2 s", "load (undisturbed / disturbed)",
                        "counts vs truth"], rows),
        "",
        "Timeline of the disturbed runs (s from the fault unless said otherwise):",
        "",
        markdown_table(["pair", "fault", "victim", "JobManager decided lost",
                        "TaskManagerLost seen here", "detected by", "attempt FAILED",
                        "new attempt DEPLOYING", "on", "victim registered again",
                        "victim's new Spark started", "victim subtask's runtime undisturbed",
                        "new attempt runtime", "source stage done (s from job start): "
                        "undisturbed / disturbed", "vertex-4 attempts, RUNNING -> FINISHED s "
                        "[TaskManager]: undisturbed / disturbed"], timeline),
        "",
        "Detection delay (s, from the fault to the JobManager's TaskManagerLost):",
        "",
        markdown_table(["fault", "clusterdeck (defaults: 1 s / 6 s)", "detected by", FLINK],
                       detection),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recovery",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one kill pair and one hang pair over 70 MB")
    parser.add_argument("--pairs", type=int, help="undisturbed/kill pairs (default 2)")
    parser.add_argument("--hangs", type=int, help="undisturbed/SIGSTOP pairs (default 1)")
    parser.add_argument("--size-mb", type=int, help="input MB (default 130, quick 70)")
    parser.add_argument("--at", type=float, default=0.5,
                        help="fault after this share of the undisturbed runtime (0.5)")
    parser.add_argument("--split-mb", type=int,
                        help="job.split-size in MiB (default: the cluster's, 64)")
    parser.add_argument("--keep", action="store_true", help="keep the generated input")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    size = args.size_mb or (70 if args.quick else 130)
    pair_count = args.pairs if args.pairs is not None else (1 if args.quick else 2)
    hang_count = args.hangs if args.hangs is not None else 1
    data = dataset(size)
    from benchmarks._harness import LoadMeter
    meter = LoadMeter()
    pairs: list[tuple[Run, Run]] = []
    hangs: list[tuple[Run, Run]] = []
    try:
        settings = {"job.split-size": args.split_mb * 1024 * 1024} if args.split_mb else {}
        with bench_cluster("recovery", **settings) as bench:
            bench.warm_up()
            job = write_job(bench.jobs_dir, "wordcount_bench", WORDCOUNT_JOB)
            plan: list[Any] = [signal.SIGKILL] * pair_count + [signal.SIGSTOP] * hang_count
            for fault in plan:
                calm = run_undisturbed(bench, job, data)
                print(f"  undisturbed: {calm.duration_s:.1f} s (vertex-1#{calm.victim_subtask} "
                      f"{calm.source_runtime_s:.1f} s; load {calm.load:.1f})", file=sys.stderr)
                hit = run_disturbed(bench, job, data, fault, args.at * calm.source_runtime_s,
                                    calm.victim_subtask)
                print(f"  {hit.kind}: {hit.duration_s:.1f} s (lost work {hit.lost_work_s:.1f} s,"
                      f" detected {hit.decided_s:.3f} s; load {hit.load:.1f})", file=sys.stderr)
                (pairs if fault == signal.SIGKILL else hangs).append((calm, hit))
                settle(bench)
            kind = bench.cluster.broker_kind
        print(report(data, pairs, hangs, args.at, meter.stop().describe(), kind))
    finally:
        if not args.keep:
            shutil.rmtree(data.folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
