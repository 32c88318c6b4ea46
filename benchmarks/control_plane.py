"""Control plane throughput: one job of 2,000 subtasks, deployed and finished per second.

The lightest dataflow job there is: ``env.from_range(0, ROWS)`` with parallelism N and
a ``write_text`` sink (``--sink collect``: a ``collect()`` sink), chained into one vertex
of N subtasks (no exchange). Each subtask runs on a TaskManager slot thread through
``run_subtask`` and reads its own part of the range; with ``--rows 0`` (the default)
every part is empty and no subtask starts a Spark job: the control plane alone. With
``--rows N`` each subtask does one small Spark job. A collect() sink writes one file per
subtask; with 2,000 of them the JobResult lists the files in a manifest
(``files_manifest``) instead of itself, which the report shows.

Side by side, in the same run, the peers of benchmarks/task_peers.py schedule as many
no-op tasks: ``dask.distributed`` (2 workers x 2 threads) and Ray (4 CPUs), from the
``bench`` extra.

On a warm LocalCluster (2 TaskManagers x 2 slots by default, broker auto, Spark eager),
from the job's ExecutionStateEvents (the JobManager's clock):

- throughput: N / (first SCHEDULED -> last FINISHED); deployed per second likewise;
- per slot, between one subtask and the next in the same slot: FINISHED of one ->
  DEPLOYING of the next (the JobMaster deploys the next waiting subtask into the slot
  it holds), DEPLOYING -> RUNNING (SubmitTask to the TaskManager and its RUNNING report),
  RUNNING -> FINISHED (the task on the TaskManager, with its report);
- the control plane alone: slots / median(FINISHED -> RUNNING of the next in the same
  slot), i.e. the rate if tasks took no time at all;
- CPU seconds of the JobManager, the broker and each TaskManager (with its Spark JVM
  and Python workers) during the job.

Target: >= 1,000 subtasks/s, and at least the peers' tasks/s in the same run.

    python -m benchmarks.control_plane [--quick] [--subtasks N] [--rows R] [--slots S]
        [--runs R] [--sink text|collect] [--no-peers]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import psutil

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contextlib
import itertools

from benchmarks._harness import (
    LoadMeter,
    exit_on_sigterm,
    machine_summary,
    markdown_table,
    median,
    percentile,
)
from benchmarks.submit_latency import BenchCluster, bench_cluster, write_job
from benchmarks.task_peers import peer_rates
from clusterdeck.core.client.jobclient import collected_rows, result_files
from clusterdeck.core.config import paths
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.recorder.store import FILE_NAME, connect

S = ExecutionState

MANY_JOB = """\
def build(env):
    n, rows = int(env.args[0]), int(env.args[1])
    env.set_job_name("many-subtasks")
    numbers = env.from_range(0, rows, name="range", parallelism=n)
    if len(env.args) > 2:
        numbers.write_text(env.args[2], name="lines")
    else:
        numbers.collect(name="rows")
"""
TARGET = 1000.0
FRAME_ERROR = "FrameTooLargeError: JobSnapshot"


def cpu_seconds(pid: int | None, descendants: bool = True) -> float:
    """User + system CPU of a process, with all its descendants unless told otherwise
    (0 if gone)."""
    if pid is None:
        return 0.0
    try:
        process = psutil.Process(pid)
        total = sum(process.cpu_times()[:2])
        for child in process.children(recursive=True) if descendants else ():
            with contextlib.suppress(psutil.Error):
                total += sum(child.cpu_times()[:2])
        return total
    except psutil.Error:
        return 0.0


def cpu_snapshot(bench: BenchCluster) -> dict[str, float]:
    """CPU seconds per process; each TaskManager also as its Python process alone
    (``<name> py``): the rest is its Spark JVM and Python workers."""
    cpu = {}
    for name in ["broker", "jobmanager", *sorted(bench.taskmanagers)]:
        pid = bench.cluster.supervisor.info(name).pid
        cpu[name] = cpu_seconds(pid)
        if name in bench.taskmanagers:
            cpu[f"{name} py"] = cpu_seconds(pid, descendants=False)
    return cpu


@dataclass
class Run:
    subtasks: int
    slots: int
    span_s: float              # first SCHEDULED -> last FINISHED
    scheduled_s: float         # first -> last SCHEDULED
    deploy_span_s: float       # first -> last DEPLOYING
    wall_s: float              # submit call -> result
    duration_s: float
    recycle_ms: list[float]    # FINISHED -> DEPLOYING of the next in the same slot
    deploy_ms: list[float]     # DEPLOYING -> RUNNING
    task_ms: list[float]       # RUNNING -> FINISHED
    cycle_ms: list[float]      # FINISHED -> RUNNING of the next in the same slot
    first_deploy_ms: float     # first SCHEDULED -> first DEPLOYING
    with_splits: int           # attempts that read input splits (did Spark work)
    task_ms_with_splits: list[float]
    noop_window_s: float       # first DEPLOYING -> last FINISHED of the subtasks without splits
    snapshots_refused: int     # JobManager log lines: a JobSnapshot over rpc.framesize
    result_note: str           # what the JobResult carried
    cpu: dict[str, float]
    load: str
    events: int
    recorded: tuple[int, int] = (0, 0)  # messages and payload bytes the recorder stored

    @property
    def rate(self) -> float:
        return self.subtasks / self.span_s

    @property
    def noop_rate(self) -> float:
        return (self.subtasks - self.with_splits) / max(self.noop_window_s, 1e-9)

    @property
    def control_plane_rate(self) -> float:
        return self.slots / (median(self.cycle_ms) / 1000)


def attempts_with_splits(cluster_id: str, job_id: str) -> set[str]:
    """Attempt log files (safe names) of the job that read at least one input split."""
    folder = paths.cluster_log_dir(cluster_id) / "attempts"
    found = set()
    for log in folder.glob(f"{job_id}_*.log"):
        if re.search(r"reading input split", log.read_text(encoding="utf-8", errors="replace")):
            found.add(log.stem)
    return found


def log_mentions(cluster_id: str, process: str, needle: str) -> int:
    """Lines of a process's log (with its rotated files) that contain ``needle``."""
    folder = paths.cluster_log_dir(cluster_id)
    return sum(line.count(needle) for log in folder.glob(f"{process}.log*")
               for line in log.read_text(encoding="utf-8", errors="replace").splitlines())


def one_run(bench: BenchCluster, job: Path, subtasks: int, sink: str, rows: int) -> Run:
    meter = LoadMeter()
    too_large = log_mentions(bench.cluster.cluster_id, "jobmanager", FRAME_ERROR)
    began = time.time()
    before = cpu_snapshot(bench)
    args = (str(subtasks), str(rows))
    if sink == "text":
        args += (str(bench.jobs_dir / f"out-{time.monotonic_ns()}"),)
    job_id, result, wall = bench.run_job(job, args, timeout=1800.0)
    after = cpu_snapshot(bench)
    too_large = log_mentions(bench.cluster.cluster_id, "jobmanager", FRAME_ERROR) - too_large
    if result.status != JobStatus.FINISHED:
        raise RuntimeError(f"job {job_id} ended {result.status}: {result.root_cause}")
    time.sleep(0.5)  # the last events are published just before the result
    events = bench.events.executions(job_id)
    at: dict[str, dict[ExecutionState, float]] = {}
    slot_of: dict[str, tuple[str | None, int | None]] = {}
    for event in events:
        at.setdefault(event.attempt_id, {})[event.new] = event.at
        if event.new == S.DEPLOYING:
            slot_of[event.attempt_id] = (event.taskmanager_id, event.slot_index)
    first_scheduled = min(e.at for e in events if e.new == S.SCHEDULED)
    last_finished = max(e.at for e in events if e.new == S.FINISHED)
    scheduled = [e.at for e in events if e.new == S.SCHEDULED]
    deploying = [e.at for e in events if e.new == S.DEPLOYING]
    by_slot: dict[tuple[str | None, int | None], list[str]] = {}
    for attempt, slot in slot_of.items():
        by_slot.setdefault(slot, []).append(attempt)
    recycle, cycle = [], []
    for attempts in by_slot.values():
        attempts.sort(key=lambda a: at[a][S.DEPLOYING])
        for previous, following in itertools.pairwise(attempts):
            if S.FINISHED in at[previous]:
                recycle.append(1000 * (at[following][S.DEPLOYING] - at[previous][S.FINISHED]))
                if S.RUNNING in at[following]:
                    cycle.append(1000 * (at[following][S.RUNNING] - at[previous][S.FINISHED]))
    deploy = [1000 * (s[S.RUNNING] - s[S.DEPLOYING]) for s in at.values()
              if S.RUNNING in s and S.DEPLOYING in s]
    task = {a: 1000 * (s[S.FINISHED] - s[S.RUNNING]) for a, s in at.items()
            if S.RUNNING in s and S.FINISHED in s}
    safe = {a.replace("/", "_").replace("#", "-"): a for a in at}
    split_readers = {safe[name] for name in attempts_with_splits(bench.cluster.cluster_id, job_id)
                     if name in safe}
    noop = [a for a in at if a not in split_readers]
    noop_window = (max(at[a].get(S.FINISHED, 0.0) for a in noop)
                   - min(at[a].get(S.DEPLOYING, float("inf")) for a in noop)) if noop else 0.0
    bench.events.forget(job_id)
    return Run(subtasks, bench.slots, last_finished - first_scheduled,
               max(scheduled) - min(scheduled), max(deploying) - min(deploying), wall,
               result.duration or 0.0, recycle, deploy, list(task.values()), cycle,
               1000 * (min(deploying) - first_scheduled), len(split_readers),
               [task[a] for a in split_readers if a in task], noop_window, too_large,
               f"duration {result.duration}, {len(result_files(result)[1])} collected files "
               f"({len(collected_rows(result))} rows), {len(result_files(result)[0])} output "
               f"files, manifest {'yes' if result.files_manifest else 'no'}",
               {k: after[k] - before.get(k, 0.0) for k in after}, meter.stop().describe(),
               len(events), recorded_since(bench.cluster.cluster_id, began))


def recorded_since(cluster_id: str, began: float) -> tuple[int, int]:
    """Messages and payload bytes in the cluster's flight recording since ``began``."""
    path = paths.cluster_dir(cluster_id) / FILE_NAME
    if not path.exists():
        return (0, 0)
    time.sleep(0.5)  # the recorder commits every 0.25 s
    with closing(connect(path, readonly=True)) as db:
        count, size = db.execute("SELECT count(*), coalesce(sum(length(payload)), 0) "
                                 "FROM messages WHERE at >= ?", (began,)).fetchone()
    return (int(count), int(size))


def report(runs: list[Run], kind: str, sink: str, range_end: int) -> str:
    def dist(values: list[float]) -> str:
        if not values:
            return "-"
        return (f"{median(values):.1f} / {percentile(values, 0.95):.1f} / "
                f"{max(values):.1f}")
    rows = [(index + 1, run.subtasks, f"{run.span_s:.2f}", f"**{run.rate:.0f}**",
             f"{run.subtasks / max(run.deploy_span_s, 1e-9):.0f}", f"{run.scheduled_s:.2f}",
             f"{run.first_deploy_ms:.0f}", f"{run.wall_s:.2f}", run.with_splits,
             f"{run.control_plane_rate:.0f}", run.load)
            for index, run in enumerate(runs)]
    gap_rows = []
    for index, run in enumerate(runs):
        gap_rows.append((index + 1, dist(run.recycle_ms), dist(run.deploy_ms),
                         dist(run.task_ms), dist(run.task_ms_with_splits), dist(run.cycle_ms)))
    cpu_rows = [(index + 1, *[f"{run.cpu[name]:.1f}" for name in sorted(run.cpu)],
                 f"{1000 * run.cpu['jobmanager'] / run.subtasks:.2f}")
                for index, run in enumerate(runs)]
    rates = [run.rate for run in runs]
    met = "met" if min(rates) >= TARGET else "missed"
    return "\n".join([
        f"Machine: {machine_summary()}.",
        f"Broker {kind}; 2 TaskManagers x {runs[0].slots // 2} slots ({runs[0].slots} slots), "
        f"spark.start eager, warm; job `from_range(0, {range_end})` with parallelism N and a "
        f"{'write_text' if sink == 'text' else 'collect()'} sink (one vertex, N subtasks). "
        "Times from the JobManager's event timestamps.",
        "",
        markdown_table(["run", "subtasks", "first SCHEDULED -> last FINISHED (s)",
                        "subtasks/s", "deployed/s", "all SCHEDULED within (s)",
                        "first SCHEDULED -> first DEPLOYING (ms)", "submit -> result (s)",
                        "subtasks that read an input split",
                        "control plane alone: slots / median cycle (subtasks/s)",
                        "CPU busy / load"], rows),
        "",
        "Per slot, ms, median / p95 / max:",
        "",
        markdown_table(["run", "FINISHED -> next DEPLOYING (the slot to the next subtask)",
                        "DEPLOYING -> RUNNING (SubmitTask, RUNNING report)",
                        "RUNNING -> FINISHED (all tasks)",
                        "RUNNING -> FINISHED (tasks that read splits)",
                        "FINISHED -> next RUNNING (cycle)"], gap_rows),
        "",
        "CPU seconds during the job (process and descendants):",
        "",
        markdown_table(["run", *sorted(runs[0].cpu), "JobManager ms per subtask"], cpu_rows),
        "",
        "JobSnapshots refused at the JobManager for exceeding rpc.framesize (log lines "
        f"`{FRAME_ERROR}` during each run): {', '.join(str(r.snapshots_refused) for r in runs)}."
        f" JobResult as the client got it: {'; '.join(r.result_note for r in runs)}.",
        "",
        "Flight recording of each run (messages, payload MB, kB per 1,000 subtasks): "
        + ", ".join(f"{r.recorded[0]:,} / {r.recorded[1] / 1e6:.1f} / "
                    f"{r.recorded[1] / 1e3 / r.subtasks * 1000:,.0f}" for r in runs) + ".",
        "",
        f"Target (>= {TARGET:.0f} subtasks/s, first SCHEDULED to last FINISHED): "
        f"**{met}** ({', '.join(f'{r:.0f}' for r in rates)} subtasks/s).",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.control_plane",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 subtasks, one run")
    parser.add_argument("--subtasks", type=int, help="subtasks (default 2000, quick 200)")
    parser.add_argument("--slots", type=int, default=2, help="slots per TaskManager (2)")
    parser.add_argument("--runs", type=int, help="jobs, one after the other (default 2)")
    parser.add_argument("--rows", type=int, default=0, help="elements of the range (0: "
                        "every part empty, no Spark job at all)")
    parser.add_argument("--no-peers", action="store_true", help="skip Dask and Ray")
    parser.add_argument("--no-recorder", action="store_true", help="run the cluster "
                        "without its flight recorder (recorder.enabled = false)")
    parser.add_argument("--sink", choices=["text", "collect"], default="text",
                        help="text (default): write_text into a temp folder; collect: "
                        "collect(), whose JobResult lists one file per subtask")
    parser.add_argument("-D", dest="setting", action="append", default=[],
                        metavar="KEY=VALUE", help="a setting of the cluster (ha.mode=local "
                        "-D jobmanager.count=2, ...), as clusterdeck up -D")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    subtasks = args.subtasks or (200 if args.quick else 2000)
    count = args.runs or (1 if args.quick else 2)
    runs = []
    settings = dict(setting.split("=", 1) for setting in args.setting)
    with bench_cluster("control", **{"taskmanager.slots": args.slots,
                                     "recorder.enabled": not args.no_recorder,
                                     **settings}) as bench:
        bench.warm_up()
        job = write_job(bench.jobs_dir, "many_subtasks", MANY_JOB)
        for index in range(count):
            run = one_run(bench, job, subtasks, args.sink, args.rows)
            print(f"  run {index + 1}: {run.subtasks} subtasks in {run.span_s:.2f} s = "
                  f"{run.rate:.0f}/s (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
            runs.append(run)
        kind = bench.cluster.broker_kind
    peers = {} if args.no_peers else peer_rates(subtasks, count)
    print(report(runs, kind, args.sink, args.rows))
    print()
    print(peer_report(runs, peers, subtasks))
    return 0


def peer_report(runs: list[Run], peers: dict[str, list[float] | str], tasks: int) -> str:
    """clusterdeck's runs beside the peers', each round of each."""
    rows = [("clusterdeck (2 TaskManagers x slots, one job)",
             ", ".join(f"{run.rate:.0f}" for run in runs))]
    rows += [(name, rates if isinstance(rates, str) else ", ".join(f"{r:.0f}" for r in rates))
             for name, rates in peers.items()]
    best = max([r for rates in peers.values() if not isinstance(rates, str) for r in rates],
               default=0.0)
    ours = min(run.rate for run in runs)
    verdict = ("**met**" if ours >= TARGET and ours >= best else "**missed**")
    return "\n".join([
        f"Side by side in the same run, {tasks} no-op tasks (subtasks) each round:", "",
        markdown_table(["system", "tasks/s per round"], rows), "",
        f"Target (>= {TARGET:.0f}/s and at least the peers' best, {best:.0f}/s): {verdict} "
        f"(clusterdeck's slowest round {ours:.0f}/s)."])


if __name__ == "__main__":
    sys.exit(main())
