"""A keyed tumbling-window count: clusterdeck against Spark Structured Streaming, the same
query on the same input, one after the other in one run on this machine (issue 17).

The query: records ``(i, "key-<i mod KEYS>")`` at RATE a second from each system's rate
source, keyed by key, counted in tumbling windows of event time, a line
``key,start,end,count`` per key and window into files, committed exactly once with each
checkpoint (clusterdeck: ``benchmarks/jobs/window_count.py``, a checkpoint every INTERVAL
seconds; Spark: ``benchmarks/_structured_streaming.py``, ``local[P]``, a micro-batch
trigger every INTERVAL seconds, file sink in append mode). Parallelism P for both.

Event time is the time the source is due to emit a record: record ``i`` at ``start + i /
RATE``. Spark's rate source stamps it so (``timestamp``); clusterdeck's job computes ``i
/ RATE`` and the benchmark adds the start, the time its source subtasks went RUNNING (the
JobManager's stamp, a few milliseconds after the first poll). So a window ``[t, t + W)``
ends at a known wall time for both, and its **latency** is from that time to when a
watcher thread here (polling every 50 ms) first sees its line committed: a ``part-`` file
of clusterdeck's sink, a ``_spark_metadata`` batch of Spark's.

Phases (each system alone on the machine: the cluster's phases first, then Spark's):

1. latency: KEYS (10) keys at RATE, 1 s windows, for DURATION seconds; then
2. recovery, on the same running job/query, ROUNDS times: clusterdeck, kill -9 of a
   TaskManager running a window subtask (its supervisor restarts it; the job fails over
   to its latest checkpoint); Spark, SIGKILL of the driver process and a new one started
   on the same checkpoint location. Time from the kill to the first new committed line.
3. throughput: PEAK records a second offered (beyond what either sustains), for DURATION
   seconds: records counted in the committed windows per second of wall time.
4. state: STATE_RATE records a second, STATE_WINDOW-second windows, STATE_KEYS keys
   each: clusterdeck's checkpoints (duration, size) from the job's snapshot; Spark's
   state store per micro-batch (rows, memory, commit time) from ``lastProgress``.

    python -m benchmarks.streaming_windows [--duration S] [--rate R] [--peak-rate R]
        [--rounds N] [--keys K] [--state-keys K...] [--state-rate R] [--skip-spark]
        [--skip-cluster] [-D KEY=VALUE]... [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _window_forms
from benchmarks._harness import (
    Children,
    LoadMeter,
    exit_on_sigterm,
    machine_summary,
    markdown_table,
    median,
    percentile,
    python_module,
)

JOB = Path(__file__).resolve().parent / "jobs" / "window_count.py"
WINDOW_VERTEX = "count per window"
POLL = 0.05        # seconds between two looks at an output folder
WARM_UP = 8.0      # seconds of event time whose windows are left out of the latency (start-up)


# -- what became visible when --------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    seen: float    # time.time() the watcher first saw it committed
    key: str
    start: float
    end: float
    count: int


class CommittedLines:
    """A thread that polls an output folder and stamps every committed line when first
    seen. ``kind`` "clusterdeck": the sink's ``part-`` files (renamed into place once
    their checkpoint completed); "spark": the files each ``_spark_metadata`` batch log
    names (the file sink's commit point). The watcher's thread only reads files and
    appends under the lock; ``lines`` copies on the caller's thread."""

    def __init__(self, folder: Path, kind: str) -> None:
        self.folder, self.kind = folder, kind
        self._lines: list[Line] = []
        self._read: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"watch-{folder.name}")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            try:
                found = self._new_files()
            except OSError:
                continue
            now = time.time()
            for path in found:
                lines = [_parse(text, now) for text in
                         path.read_text(encoding="utf-8").splitlines() if text]
                with self._lock:
                    self._lines.extend(lines)

    def _new_files(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        if self.kind == "clusterdeck":
            names = sorted(n for n in os.listdir(self.folder)
                           if n.startswith("part-") and n not in self._read)
            self._read.update(names)
            return [self.folder / n for n in names]
        logs = self.folder / "_spark_metadata"
        if not logs.is_dir():
            return []
        found = []
        for name in sorted(n for n in os.listdir(logs) if not n.startswith(".")
                           and f"log:{n}" not in self._read):
            entries = (logs / name).read_text(encoding="utf-8").splitlines()[1:]
            self._read.add(f"log:{name}")
            for entry in entries:
                path = json.loads(entry)["path"].removeprefix("file://")
                if path not in self._read:
                    self._read.add(path)
                    found.append(Path(path))
        return found

    def lines(self) -> list[Line]:
        with self._lock:
            return list(self._lines)

    def first_new(self, known: set[tuple[str, float]], after: float,
                  timeout: float) -> Line | None:
        """The first line seen after ``after`` of a window not in ``known``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fresh = [x for x in self.lines() if x.seen > after and (x.key, x.start) not in known]
            if fresh:
                return min(fresh, key=lambda x: x.seen)
            time.sleep(POLL)
        return None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _parse(text: str, seen: float) -> Line:
    key, start, end, count = text.split(",")
    return Line(seen, key, float(start), float(end), int(count))


def windows(lines: Sequence[Line]) -> set[tuple[str, float]]:
    return {(x.key, x.start) for x in lines}


# -- the measurements ------------------------------------------------------------------------


@dataclass
class Phase:
    """One system's run of one phase, measured the same way for both."""

    system: str
    name: str
    rate: float
    keys: int
    window: float
    began: float = 0.0         # time.time() of the submit / the driver's start
    ended: float = 0.0         # when it was cancelled / stopped
    origin: float = 0.0        # the wall time of event time 0 (clusterdeck) or 0.0 (Spark)
    lines: list[Line] = field(default_factory=list)
    load: str = ""
    notes: list[str] = field(default_factory=list)
    checkpoints: list[Any] = field(default_factory=list)   # clusterdeck's, completed
    failed_checkpoints: int = 0
    progress: list[dict[str, Any]] = field(default_factory=list)  # Spark's micro-batches
    recoveries: list[dict[str, float]] = field(default_factory=list)
    state_bytes_on_disk: int = 0
    first_kill: float = float("inf")   # latency counts only what was seen before it
    consumed: list[tuple[float, float]] = field(default_factory=list)  # (time, records in)

    def latencies(self, until: float | None = None) -> list[float]:
        """Window end (wall) to its line seen, seconds; warm-up windows left out."""
        first_end = min((x.end for x in self.lines), default=0.0)
        return [x.seen - (self.origin + x.end) for x in self.lines
                if x.end >= first_end + WARM_UP and (until is None or x.seen < until)]

    def throughput(self) -> float:
        """Records in the windows committed per second, from the first commit after a
        fifth of the run to the last commit."""
        seen = sorted({x.seen for x in self.lines})
        if len(seen) < 3:
            return 0.0
        first = seen[0] + (seen[-1] - seen[0]) / 5
        t1 = next(t for t in seen if t >= first)
        counted = sum(x.count for x in self.lines if t1 < x.seen <= seen[-1])
        return counted / max(seen[-1] - t1, 1e-9)

    def records_rate(self, until: float = float("inf")) -> float:
        """Records taken in by the window operator per second (clusterdeck: its subtasks'
        records in, from the TaskManagers' metrics; Spark: each micro-batch's
        numInputRows), from a fifth of the run to its end (or ``until``)."""
        points = sorted(x for x in self.consumed if x[0] < until)
        if len(points) < 3:
            return 0.0
        first = points[0][0] + (points[-1][0] - points[0][0]) / 5
        start = next(x for x in points if x[0] >= first)
        return (points[-1][1] - start[1]) / max(points[-1][0] - start[0], 1e-9)

    def lag(self) -> float:
        """How far event time of the committed output was behind the wall clock at the
        end: the newest window end committed, against the time the run was stopped (the
        whole run when nothing was committed, not the time since the epoch)."""
        newest = max((x.end for x in self.lines), default=0.0)
        return self.ended - (self.origin + newest) if self.lines else self.ended - self.began

    def check(self) -> str:
        """Every window once, and (keys dividing the window's records) each key's count
        the same: what the undisturbed source gives."""
        seen: dict[tuple[str, float], int] = {}
        repeated = 0
        for x in self.lines:
            repeated += (x.key, x.start) in seen
            seen[(x.key, x.start)] = x.count
        expected = self.rate * self.window / self.keys
        wrong = (sum(1 for c in seen.values() if c != expected)
                 if expected == int(expected) and expected >= 1 else None)
        return (f"{len(seen)} windows x keys, {repeated} repeated"
                + (f", {wrong} with a count other than {expected:g}" if wrong is not None
                   else ""))


def dist(values: Sequence[float], scale: float = 1.0, digits: int = 2) -> str:
    if not values:
        return "-"
    return (f"{median(values) * scale:.{digits}f} / {percentile(values, 0.99) * scale:.{digits}f}"
            f" / {max(values) * scale:.{digits}f}")


# -- clusterdeck ------------------------------------------------------------------------------


class JobWatch:
    """Polls a streaming job's retained snapshot every half second (on its own thread):
    its checkpoints as they complete (the snapshot carries the newest 20) and its
    source subtasks' RUNNING times."""

    def __init__(self, client: Any, job_id: str) -> None:
        self.client, self.job_id = client, job_id
        self.checkpoints: dict[int, Any] = {}
        self.failed = 0
        self.latest: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="job-watch")
        self._thread.start()

    def _run(self) -> None:
        from clusterdeck.core.protocol.checkpointstats import CheckpointStatus
        while not self._stop.wait(0.5):
            try:
                snapshot = self.client.snapshot(self.job_id, 2.0)
            except Exception:  # a slow answer: asked again half a second later
                continue
            if snapshot is None:
                continue
            self.latest = snapshot.graph
            stats = snapshot.graph.checkpoints
            if stats is None:
                continue
            self.failed = stats.failed
            for record in stats.history:
                if record.status is CheckpointStatus.COMPLETED:
                    self.checkpoints[record.checkpoint_id] = record

    def sources_running(self, timeout: float = 120.0) -> float:
        """When the last source subtask's current attempt went RUNNING (wall time)."""
        from clusterdeck.core.protocol.states import ExecutionState
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            graph = self.latest
            if graph is not None:
                times = [s.current.state_timestamps.get(ExecutionState.RUNNING)
                         for v in graph.vertices if v.is_source for s in v.subtasks
                         if s.current is not None]
                if times and all(t is not None for t in times):
                    return max(times)
            time.sleep(0.1)
        raise TimeoutError(f"the sources of job {self.job_id} are not RUNNING")

    def running_on(self, vertex_part: str) -> str | None:
        from clusterdeck.core.protocol.states import ExecutionState
        graph = self.latest
        for vertex in graph.vertices if graph else ():
            if vertex_part in vertex.name:
                for subtask in vertex.subtasks:
                    current = subtask.current
                    if current and current.state is ExecutionState.RUNNING and current.slot:
                        return current.slot.taskmanager_id
        return None

    def restored_after(self, moment: float, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            graph = self.latest
            restored = graph.checkpoints.restored if graph and graph.checkpoints else None
            if restored is not None and restored.restored > moment:
                return restored.restored
            time.sleep(0.1)
        return None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


class RecordsIn:
    """The records in of a vertex's attempts from the TaskManagers' metrics (once a second
    each, on paho's thread): ``total()`` sums the latest of every attempt."""

    def __init__(self, client: Any) -> None:
        from clusterdeck.core.protocol import messages as p
        from clusterdeck.core.protocol import topics
        self._latest: dict[str, int] = {}
        self._lock = threading.Lock()
        self.job_id = self.vertex_id = ""
        self.points: list[tuple[float, float]] = []

        def on_metrics(_topic: str, message: Any) -> None:
            if not isinstance(message, p.TaskManagerMetrics):
                return
            with self._lock:
                for attempt in message.attempts:
                    if attempt.job_id == self.job_id and attempt.vertex_id == self.vertex_id:
                        self._latest[attempt.attempt_id] = attempt.records_in
                if self.job_id:
                    self.points.append((time.time(), float(sum(self._latest.values()))))
        client.service.subscribe(topics.METRICS_ALL, on_metrics)

    def follow(self, job_id: str, vertex_id: str) -> None:
        with self._lock:
            self.job_id, self.vertex_id = job_id, vertex_id
            self._latest, self.points = {}, []

    def taken(self) -> list[tuple[float, float]]:
        with self._lock:
            points, self.job_id = list(self.points), ""
            return points


def cluster_phase(bench: Any, phase: Phase, work: Path, duration: float, interval: float,
                  out_of_orderness: float, parallelism: int, rounds: int = 0,
                  job: Path = JOB) -> Phase:
    """Submit the job, let it run ``duration`` seconds (then the kills of ``rounds``),
    cancel it; what was committed, when, and its checkpoints."""
    out = work / f"cd-{phase.name}"
    meter = LoadMeter()
    phase.began = time.time()
    job_id = bench.client.submit(job, (str(out), "0", f"{phase.rate:g}", str(phase.keys),
                                       str(parallelism), f"{phase.window:g}",
                                       f"{interval:g}", f"{out_of_orderness:g}"))
    watch = JobWatch(bench.client, job_id)
    committed = CommittedLines(out, "clusterdeck")
    try:
        phase.origin = watch.sources_running()
        bench.records_in.follow(job_id, next(v.id for v in watch.latest.vertices
                                             if WINDOW_VERTEX in v.name))
        time.sleep(max(0.0, phase.origin + duration - time.time()))
        for index in range(rounds):
            phase.recoveries.append(kill_a_taskmanager(bench, phase, watch, committed))
            print(f"  clusterdeck recovery {index + 1}: "
                  f"{phase.recoveries[-1]['first_new']:.2f} s", file=sys.stderr)
        bench.client.cancel(job_id)
        phase.ended = time.time()
        time.sleep(1.0)  # the last commits the watcher has yet to see
    finally:
        committed.close()
        watch.close()
    phase.lines = committed.lines()
    phase.consumed = bench.records_in.taken()
    phase.checkpoints = sorted(watch.checkpoints.values(), key=lambda r: r.checkpoint_id)
    phase.failed_checkpoints = watch.failed
    phase.load = meter.stop().describe()
    return phase


def kill_a_taskmanager(bench: Any, phase: Phase, watch: JobWatch,
                       committed: CommittedLines, timeout: float = 180.0) -> dict[str, float]:
    """kill -9 of a TaskManager running a window subtask; seconds from the kill to the
    job restored from its checkpoint and to the first new committed line. Then waits for
    the TaskManager to be back and the output to flow for a while."""
    deadline = time.monotonic() + 60
    victim = None
    while victim is None and time.monotonic() < deadline:
        victim = watch.running_on(WINDOW_VERTEX)
        time.sleep(0.1)
    if victim is None:
        raise RuntimeError("no window subtask RUNNING to kill a TaskManager under")
    pid = bench.cluster.supervisor.info(victim).pid
    known = windows(committed.lines())
    killed = time.time()
    os.kill(pid, signal.SIGKILL)
    phase.first_kill = min(phase.first_kill, killed)
    line = committed.first_new(known, killed, timeout)
    if line is None:
        raise RuntimeError(f"no new output within {timeout:g} s of killing {victim}")
    restored = watch.restored_after(killed, 10.0)
    bench.observer.wait_registered_now(bench.taskmanagers, 120.0)
    time.sleep(10.0)
    return {"first_new": line.seen - killed,
            "restored": (restored - killed) if restored else float("nan")}


@contextmanager
def cluster_for(parallelism: int, keep_logs: Path,
                settings: Sequence[str] = ()) -> Iterator[Any]:
    """bench_cluster with 2 TaskManagers x ``parallelism`` slots (every subtask of a
    streaming job holds a slot: P sources and P windows) and ``settings`` (``KEY=VALUE``,
    as ``-D``); its logs are copied to ``keep_logs`` on the way out."""
    from benchmarks.submit_latency import bench_cluster
    from clusterdeck.core.config import paths
    from clusterdeck.core.config.settings import parse_override
    with bench_cluster("streaming", **{"taskmanager.count": 2,
                                       "taskmanager.slots": parallelism,
                                       **dict(map(parse_override, settings))}) as bench:
        try:
            yield bench
        finally:
            shutil.rmtree(keep_logs, ignore_errors=True)
            shutil.copytree(paths.cluster_log_dir(bench.cluster.cluster_id), keep_logs,
                            dirs_exist_ok=True)


# -- Spark Structured Streaming -------------------------------------------------------------


class SparkDriver:
    """The child process that runs the queries of one spec; killed and restarted on the
    same spec for recovery."""

    def __init__(self, children: Children, work: Path, name: str,
                 queries: list[dict[str, Any]], parallelism: int) -> None:
        self.children, self.name = children, name
        self.spec = work / f"{name}.json"
        self.spec.write_text(json.dumps({"parallelism": parallelism, "queries": queries}),
                             encoding="utf-8")
        self.process: Any = None

    def start(self) -> float:
        started = time.time()
        self.process = self.children.start(self.name, python_module(
            "benchmarks._structured_streaming", str(self.spec)))
        return started

    def wait(self, timeout: float) -> int:
        code = self.process.wait(timeout)
        if code != 0:
            raise RuntimeError(f"the Spark driver {self.name} exited with {code}; see "
                               f"{self.children.log_dir}/{self.name}.log")
        return code

    def kill(self) -> float:
        killed = time.time()
        self.children.stop(self.process, grace=0.0, sig=signal.SIGKILL)
        return killed


def spark_query(work: Path, phase: Phase, interval: float, out_of_orderness: float,
                duration: float, key: str = "sql") -> dict[str, Any]:
    return {"out": str(work / f"ss-{phase.name}"), "checkpoint": str(work / f"ss-{phase.name}-chk"),
            "progress": str(work / f"ss-{phase.name}.progress"), "rate": phase.rate,
            "keys": phase.keys, "window": phase.window, "interval": interval,
            "out_of_orderness": out_of_orderness, "duration": duration, "key": key}


def progress_of(query: dict[str, Any]) -> list[dict[str, Any]]:
    path = Path(query["progress"])
    if not path.is_file():
        return []
    return [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines() if text]


def wait_started(query: dict[str, Any], after: float, driver: SparkDriver,
                 timeout: float = 180.0) -> float:
    """When the query (re)started after ``after``, from its progress file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.process.poll() not in (None, 0):
            raise RuntimeError(f"the Spark driver exited with {driver.process.returncode}; "
                               f"see {driver.children.log_dir}/{driver.name}.log")
        started = [e["started"] for e in progress_of(query) if e.get("started", 0) > after]
        if started:
            return started[0]
        time.sleep(0.1)
    raise TimeoutError(f"the query writing {query['out']} did not start")


def spark_latency_and_recovery(children: Children, work: Path, phase: Phase,
                               query: dict[str, Any], duration: float,
                               rounds: int, parallelism: int) -> Phase:
    meter = LoadMeter()
    driver = SparkDriver(children, work, f"spark-{phase.name}", [query], parallelism)
    committed = CommittedLines(Path(query["out"]), "spark")
    try:
        phase.began = driver.start()
        wait_started(query, phase.began, driver)
        time.sleep(duration)
        for index in range(rounds):
            known = windows(committed.lines())
            killed = driver.kill()
            phase.first_kill = min(phase.first_kill, killed)
            driver.start()
            line = committed.first_new(known, killed, 180.0)
            if line is None:
                raise RuntimeError("no new output from the restarted query within 180 s")
            entries = progress_of(query)
            ready = next(e["session_ready"] for e in reversed(entries) if "session_ready" in e)
            started = wait_started(query, killed, driver)
            phase.recoveries.append({"first_new": line.seen - killed,
                                     "session": ready - killed, "started": started - killed})
            print(f"  spark recovery {index + 1}: {line.seen - killed:.2f} s", file=sys.stderr)
            time.sleep(10.0)
        phase.ended = driver.kill()
        time.sleep(0.5)
    finally:
        committed.close()
        if driver.process is not None:
            children.stop(driver.process, grace=0.0, sig=signal.SIGKILL)
    phase.lines = committed.lines()
    phase.progress = [e["progress"] for e in progress_of(query) if "progress" in e]
    phase.consumed = spark_consumed(progress_of(query))
    phase.load = meter.stop().describe()
    return phase


def spark_runs(children: Children, work: Path, phases: list[Phase],
               queries: list[dict[str, Any]], parallelism: int) -> list[Phase]:
    """Queries one after the other in one driver; each its own output and checkpoint."""
    driver = SparkDriver(children, work, "spark-runs", queries, parallelism)
    watchers = [CommittedLines(Path(q["out"]), "spark") for q in queries]
    meters: list[LoadMeter] = []
    try:
        driver.start()
        for query in queries:
            wait_started(query, 0.0, driver, timeout=600.0)
            meters.append(LoadMeter())
            if len(meters) > 1:
                phases[len(meters) - 2].load = meters[-2].stop().describe()
        driver.wait(timeout=600.0)
        phases[-1].load = meters[-1].stop().describe()
        time.sleep(0.5)
    finally:
        for watcher in watchers:
            watcher.close()
        if driver.process is not None:
            children.stop(driver.process, grace=5.0)
    for phase, query, watcher in zip(phases, queries, watchers, strict=True):
        entries = progress_of(query)
        phase.began = next(e["started"] for e in entries if "started" in e)
        phase.ended = next((e["stopped"] for e in entries if "stopped" in e), time.time())
        phase.lines = watcher.lines()
        phase.progress = [e["progress"] for e in entries if "progress" in e]
        phase.consumed = spark_consumed(entries)
        phase.state_bytes_on_disk = sum(
            p.stat().st_size for p in (Path(query["checkpoint"]) / "state").rglob("*")
            if p.is_file())
    return phases


# -- the report ------------------------------------------------------------------------------


def spark_consumed(entries: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(time the micro-batch was reported, its numInputRows summed up to it)."""
    total, points = 0.0, []
    for entry in entries:
        if "progress" in entry:
            total += float(entry["progress"].get("numInputRows", 0))
            points.append((entry["at"], total))
    return points


def spark_state(progress: list[dict[str, Any]]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {"rows": [], "memory": [], "commit_ms": [], "batch_ms": [],
                                     "input": []}
    for entry in progress:
        operators = entry.get("stateOperators") or []
        if operators:
            found["rows"].append(float(operators[0].get("numRowsTotal", 0)))
            found["memory"].append(float(operators[0].get("memoryUsedBytes", 0)))
            found["commit_ms"].append(float(operators[0].get("commitTimeMs", 0)))
        found["batch_ms"].append(float(entry["durationMs"].get("triggerExecution", 0)))
        found["input"].append(float(entry.get("numInputRows", 0)))
    return found


def report(results: dict[str, list[Phase]], args: argparse.Namespace) -> str:
    out = [f"Machine: {machine_summary()}.", ""]
    by = {(p.system, p.name): p for phases in results.values() for p in phases}
    systems = [s for s in ("clusterdeck", "spark") if any(k[0] == s for k in by)]

    latency_rows = []
    for system in systems:
        phase = by.get((system, "latency"))
        if phase is None:
            continue
        values = phase.latencies(phase.first_kill)
        latency_rows.append((system, f"{phase.rate:,.0f}", phase.keys, len(values),
                             dist(values, 1000, 0),
                             f"{phase.records_rate(phase.first_kill):,.0f}",
                             phase.check(), phase.load))
    out += [f"Latency ({args.keys} keys, 1 s windows, {args.rate:,.0f} records/s, "
            f"checkpoint / trigger every {args.interval:g} s, out-of-orderness "
            f"{args.out_of_orderness:g} s): window end (wall) to its line committed, ms",
            "", markdown_table(["system", "records/s offered", "keys", "lines",
                                "latency p50 / p99 / max ms", "records/s into the windows",
                                "output check", "CPU busy / load"], latency_rows), ""]

    recovery_rows = []
    for system in systems:
        phase = by.get((system, "latency"))
        for index, rec in enumerate(phase.recoveries if phase else ()):
            if system == "clusterdeck":
                what = (f"kill -9 TaskManager; restored from checkpoint at "
                        f"{rec['restored']:.2f} s")
            else:
                what = (f"SIGKILL driver, new driver: session at {rec['session']:.2f} s, "
                        f"query started at {rec['started']:.2f} s")
            recovery_rows.append((system, index + 1, what, f"**{rec['first_new']:.2f}**"))
    if recovery_rows:
        out += ["Recovery: kill to the first new committed window line, seconds", "",
                markdown_table(["system", "round", "what happened", "kill -> new output (s)"],
                               recovery_rows), ""]

    peak_rows = []
    for system in systems:
        phase = by.get((system, "peak"))
        if phase is None:
            continue
        extra = ""
        if system == "spark":
            rates = [e.get("processedRowsPerSecond", 0.0) for e in phase.progress[2:]]
            extra = f"processedRowsPerSecond median {median(rates):,.0f}" if rates else ""
        else:
            extra = f"{len(phase.checkpoints)} checkpoints, {phase.failed_checkpoints} failed"
        peak_rows.append((system, f"{phase.rate:,.0f}", f"**{phase.records_rate():,.0f}**",
                          f"{phase.throughput():,.0f}", f"{phase.lag():.1f}",
                          dist(phase.latencies(), 1, 1), extra, phase.load))
    if peak_rows:
        out += [f"Throughput ({args.keys} keys, 1 s windows, {args.peak_rate:,.0f} records/s "
                f"offered for {args.duration:g} s):", "",
                markdown_table(["system", "offered", "records/s into the windows",
                                "records/s in committed windows",
                                "event time behind at the end (s)",
                                "latency p50 / p99 / max s", "the system's own numbers",
                                "CPU busy / load"], peak_rows), ""]

    state_rows = []
    for phase in results.get("state", []):
        if phase.system == "clusterdeck":
            durations = [r.duration for r in phase.checkpoints if r.duration is not None]
            sizes = [float(r.size) for r in phase.checkpoints]
            state_rows.append((
                "clusterdeck", f"{phase.keys:,}", f"{phase.records_rate():,.0f}",
                f"{len(phase.checkpoints)} ({phase.failed_checkpoints} failed)",
                dist(durations, 1000, 0), dist(sizes, 1 / 1024, 0), "-", "-",
                f"{phase.lag():.1f}", phase.load))
        else:
            state = spark_state(phase.progress)
            state_rows.append((
                "spark", f"{phase.keys:,}", f"{phase.records_rate():,.0f}",
                f"{len(phase.progress)} batches", dist(state["commit_ms"], 1, 0),
                dist(state["memory"], 1 / 1024, 0),
                f"{max(state['rows'], default=0):,.0f}",
                dist(state["batch_ms"], 1, 0), f"{phase.lag():.1f}", phase.load))
    if state_rows:
        out += [f"State ({args.state_rate:,.0f} records/s, {args.state_window:g} s windows, "
                f"{args.duration:g} s each). clusterdeck: its checkpoints (duration from "
                "trigger to complete; size of the tasks' snapshots). Spark: its state store "
                "per micro-batch (commitTimeMs; memoryUsedBytes; numRowsTotal) and the "
                "micro-batch (triggerExecution).", "",
                markdown_table(["system", "keys", "records/s into the windows",
                                "checkpoints / micro-batches",
                                "checkpoint duration / state commit ms p50 / p99 / max",
                                "checkpoint size / state memory KiB p50 / p99 / max",
                                "state rows max", "micro-batch ms p50 / p99 / max",
                                "event time behind at the end (s)", "CPU busy / load"],
                               state_rows), ""]
    return "\n".join(out)


# -- the run ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.streaming_windows",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=25.0,
                        help="seconds of each phase's run (25)")
    parser.add_argument("--rate", type=float, default=2000.0,
                        help="records/s of the latency and recovery phase (2000)")
    parser.add_argument("--peak-rate", type=float, default=400_000.0,
                        help="records/s offered in the throughput phase (400000)")
    parser.add_argument("--rounds", type=int, default=2, help="kills per system (2)")
    parser.add_argument("--keys", type=int, default=10, help="keys of the latency, recovery "
                        "and throughput phases (10)")
    parser.add_argument("--state-keys", type=int, nargs="*", default=[10, 10_000, 100_000],
                        help="keys of each state run (10 10000 100000)")
    parser.add_argument("--state-rate", type=float, default=5000.0,
                        help="records/s of the state runs (5000)")
    parser.add_argument("--state-window", type=float, default=10.0,
                        help="window seconds of the state runs (10)")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="checkpoint interval and trigger, seconds (0.5)")
    parser.add_argument("--out-of-orderness", type=float, default=0.2,
                        help="watermark delay, seconds (0.2)")
    parser.add_argument("--parallelism", type=int, default=2)
    _window_forms.add_arguments(parser)
    parser.add_argument("--skip-cluster", action="store_true")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("-D", dest="setting", action="append", default=[],
                        metavar="KEY=VALUE", help="a setting of the cluster (state.backend="
                        "rocksdb, ...), as clusterdeck up -D")
    parser.add_argument("--phases", nargs="*", default=["latency", "peak", "state"])
    parser.add_argument("--work", default="/tmp/clusterdeck-bench-streaming",
                        help="output, checkpoints and kept logs (emptied first)")
    parser.add_argument("--keep", action="store_true", help="keep --work afterwards")
    parser.add_argument("--report", metavar="RESULTS_JSON",
                        help="print the tables of an earlier run's results.json, run nothing")
    args = parser.parse_args(argv)
    if args.report:
        print(report(load_results(Path(args.report)), args))
        return 0
    exit_on_sigterm()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    before = Path("/proc/loadavg").read_text(encoding="ascii").split()[:3]
    started = time.time()
    results: dict[str, list[Phase]] = {}
    try:
        if not args.skip_cluster:
            run_cluster(args, work, results)
        if not args.skip_spark:
            run_spark(args, work, results)
    finally:
        if not args.keep:
            for child in work.iterdir():
                if child.name not in ("cluster-logs", "results.json"):
                    shutil.rmtree(child, ignore_errors=True) if child.is_dir() \
                        else child.unlink()
    dump = {name: [{**{k: v for k, v in vars(p).items() if k not in ("lines", "checkpoints")},
                    "lines": [vars(x) for x in p.lines],
                    "checkpoints": [vars(r) for r in p.checkpoints]} for p in phases]
            for name, phases in results.items()}
    (work / "results.json").write_text(json.dumps(dump, default=str), encoding="utf-8")
    after = Path("/proc/loadavg").read_text(encoding="ascii").split()[:3]
    print(report(results, args))
    print(f"Load average (1/5/15 min) before {' '.join(before)}, after {' '.join(after)}; "
          f"{(time.time() - started) / 60:.1f} min in all.")
    return 0


def load_results(path: Path) -> dict[str, list[Phase]]:
    """The phases of a results.json written by a run (``--report``)."""
    from types import SimpleNamespace
    results: dict[str, list[Phase]] = {}
    for name, phases in json.loads(path.read_text(encoding="utf-8")).items():
        for data in phases:
            lines = [Line(**x) for x in data.pop("lines")]
            checkpoints = [SimpleNamespace(**x) for x in data.pop("checkpoints")]
            consumed = [tuple(x) for x in data.pop("consumed")]
            phase = Phase(**data)
            phase.lines, phase.checkpoints, phase.consumed = lines, checkpoints, consumed
            phase.first_kill = float(phase.first_kill)
            results.setdefault(name, []).append(phase)
    return results


def _phases(system: str, args: argparse.Namespace) -> dict[str, list[Phase]]:
    found: dict[str, list[Phase]] = {}
    if "latency" in args.phases:
        found["latency"] = [Phase(system, "latency", args.rate, args.keys, 1.0)]
    if "peak" in args.phases:
        found["peak"] = [Phase(system, "peak", args.peak_rate, args.keys, 1.0)]
    if "state" in args.phases:
        found["state"] = [Phase(system, f"state-{k}", args.state_rate, k, args.state_window)
                          for k in args.state_keys]
    return found


def run_cluster(args: argparse.Namespace, work: Path, results: dict[str, list[Phase]]) -> None:
    print("clusterdeck: starting a cluster", file=sys.stderr)
    with cluster_for(args.parallelism, work / "cluster-logs", args.setting) as bench:
        bench.warm_up()
        bench.records_in = RecordsIn(bench.client)
        for name, phases in _phases("clusterdeck", args).items():
            for phase in phases:
                print(f"clusterdeck: {phase.name}", file=sys.stderr)
                rounds = args.rounds if name == "latency" else 0
                cluster_phase(bench, phase, work, args.duration, args.interval,
                              args.out_of_orderness, args.parallelism, rounds,
                              _window_forms.JOBS[args.job])
                results.setdefault(name, []).append(phase)


def run_spark(args: argparse.Namespace, work: Path, results: dict[str, list[Phase]]) -> None:
    with Children(work / "spark-logs") as children:
        planned = _phases("spark", args)
        for phase in planned.pop("latency", []):
            print("spark: latency and recovery", file=sys.stderr)
            query = spark_query(work, phase, args.interval, args.out_of_orderness, 0.0,
                                args.spark_key)
            spark_latency_and_recovery(children, work, phase, query, args.duration,
                                       args.rounds, args.parallelism)
            results.setdefault("latency", []).append(phase)
        rest = [(name, phase) for name, phases in planned.items() for phase in phases]
        if rest:
            print(f"spark: {', '.join(p.name for _, p in rest)}", file=sys.stderr)
            queries = [spark_query(work, p, args.interval, args.out_of_orderness,
                                   args.duration, args.spark_key) for _, p in rest]
            spark_runs(children, work, [p for _, p in rest], queries, args.parallelism)
            for name, phase in rest:
                results.setdefault(name, []).append(phase)


if __name__ == "__main__":
    sys.exit(main())
