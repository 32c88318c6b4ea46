"""Word count over ~1 GB of text: plain PySpark local[2] against clusterdeck (2 x 1 slot).

The input is generated once (seeded: a 10,000-word vocabulary drawn with Zipf weights,
8-12 words a line) into a folder under the system's temp dir, reused when present, and
deleted at the end unless ``--keep``. Its true word counts are kept next to it.

In the same run:

(a) plain PySpark, in a child process: ``SparkSession`` with ``local[2]``, then
    ``sc.textFile -> flatMap(split) -> map((w, 1)) -> reduceByKey(add) -> collect``
    three times on the same session. Cold = from starting the process (Python, pyspark
    import, JVM) to the first result; warm = the second and third runs.
(b) clusterdeck: a LocalCluster with ``taskmanager.count = 2``, ``taskmanager.slots =
    1``, broker auto, ``spark.start = eager``, and a dataflow job with the same logic
    (``read_text -> flat_map(split) -> map((w, 1)) -> key_by(0).sum(1) -> collect``,
    parallelism 2). Cold = from ``LocalCluster.start()`` to the first result in hand;
    warm = two more submissions on the running cluster (wall time from the submit call
    to the result, and JobResult.duration).

All three (truth, PySpark, clusterdeck) must give the same counts. Per-stage timings of
the clusterdeck jobs come from their ExecutionStateEvents. Target: clusterdeck's warm
job time <= 1.2 x plain PySpark's warm run.

    python -m benchmarks.wordcount_vs_pyspark [--quick] [--size-mb N] [--keep]
        [--skip-plain] [--skip-cluster] [--profile]

``--quick`` uses 100 MB. ``--profile`` adds a cProfile of Spark's Python workers
(``spark.python.profile``) for the plain pipeline and for the runtime's own subtask code
(``clusterdeck.core.engine.local.run_local``, the path a TaskManager runs) on a 64 MB slice.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

from benchmarks._harness import (
    Children,
    LoadMeter,
    exit_on_sigterm,
    machine_summary,
    markdown_table,
    median,
    python_module,
)

SEED = 20261121
VOCABULARY = 10_000
DATA_ROOT = Path(tempfile.gettempdir())
MANIFEST = "manifest.json"
DATA_FILE = "words.txt"

WORDCOUNT_JOB = """\
def build(env):
    env.set_job_name("wordcount-bench")
    env.set_parallelism(int(env.args[1]))
    (env.read_text(env.args[0], name="read lines")
        .flat_map(lambda line: line.split(), name="split")
        .map(lambda word: (word, 1), name="pair")
        .key_by(0)
        .sum(1, name="count")
        .collect(name="counts"))
"""


# -- the input --------------------------------------------------------------------------------


@dataclass
class Dataset:
    folder: Path
    path: Path
    bytes: int
    lines: int
    words: int
    counts: dict[str, int]
    generated_s: float  # 0 when reused


def _vocabulary(seed: int) -> list[str]:
    import numpy as np
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words: dict[str, None] = {}
    while len(words) < VOCABULARY:
        length = int(rng.integers(2, 11))
        words["".join(rng.choice(letters, length))] = None
    return list(words)


def dataset(size_mb: int, seed: int = SEED) -> Dataset:
    """The input of ``size_mb`` MB (10^6 bytes): reused when its manifest is there,
    generated otherwise (written to a temp name, then renamed)."""
    import numpy as np
    folder = DATA_ROOT / f"clusterdeck-bench-words-{size_mb}MB-seed{seed}"
    manifest = folder / MANIFEST
    if manifest.is_file():
        data = json.loads(manifest.read_text(encoding="utf-8"))
        return Dataset(folder, folder / DATA_FILE, data["bytes"], data["lines"],
                       data["words"], data["counts"], 0.0)
    started = time.monotonic()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    vocabulary = _vocabulary(seed)
    weights = 1.0 / np.arange(1, VOCABULARY + 1)
    weights /= weights.sum()
    rng = np.random.default_rng(seed + 1)
    counts = np.zeros(VOCABULARY, dtype=np.int64)
    target, written, lines, words = size_mb * 1_000_000, 0, 0, 0
    partial = folder / f"{DATA_FILE}.partial"
    with open(partial, "w", encoding="ascii") as out:
        while written < target:
            lengths = rng.integers(8, 13, 100_000)
            indices = rng.choice(VOCABULARY, size=int(lengths.sum()), p=weights)
            tokens = [vocabulary[i] for i in indices.tolist()]
            bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
            text = "".join(" ".join(tokens[a:b]) + "\n" for a, b in itertools.pairwise(bounds))
            if written + len(text) > target:  # stop at the line that reaches the target
                keep = text[:target - written]
                cut = keep.rfind("\n") + 1
                text = keep[:cut] if cut > 0 else text[:text.find("\n") + 1]
                kept_lines = text.count("\n")
                lengths = lengths[:kept_lines]
                indices = indices[:int(lengths.sum())]
            out.write(text)
            written += len(text)
            lines += len(lengths)
            words += int(lengths.sum())
            counts += np.bincount(indices, minlength=VOCABULARY)
    os.replace(partial, folder / DATA_FILE)
    table = {vocabulary[i]: int(c) for i, c in enumerate(counts.tolist()) if c}
    manifest.write_text(json.dumps({"seed": seed, "bytes": written, "lines": lines,
                                    "words": words, "counts": table}), encoding="utf-8")
    return Dataset(folder, folder / DATA_FILE, written, lines, words, table,
                   time.monotonic() - started)


# -- (a) plain PySpark, in a child process --------------------------------------------------


def plain_child(input_path: str, output: str, runs: int, started_wall: float,
                no_combine: bool) -> None:
    """Runs in the child: import, start Spark local[2], count ``runs`` times; with
    ``no_combine`` once more without map-side combining (every (w, 1) pair shuffled, as
    clusterdeck's exchange ships them)."""
    begin, python_start = time.monotonic(), time.time() - started_wall
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from operator import add

    from pyspark.sql import SparkSession
    imported = time.monotonic()
    spark = (SparkSession.builder.master("local[2]").appName("plain-wordcount")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    session = time.monotonic()
    sc = spark.sparkContext
    times, counts = [], {}
    for _ in range(runs):
        t0 = time.monotonic()
        rows = (sc.textFile(input_path).flatMap(lambda line: line.split())
                .map(lambda word: (word, 1)).reduceByKey(add).collect())
        times.append(time.monotonic() - t0)
        counts = dict(rows)
    no_combine_s = None
    if no_combine:
        t0 = time.monotonic()
        rows = (sc.textFile(input_path).flatMap(lambda line: line.split())
                .map(lambda word: (word, 1)).partitionBy(2).reduceByKey(add).collect())
        no_combine_s = time.monotonic() - t0
        if dict(rows) != counts:
            raise AssertionError("the no-combine run counted differently")
    partitions = sc.textFile(input_path).getNumPartitions()
    Path(output).write_text(json.dumps({
        "python_start_s": python_start,
        "import_s": imported - begin, "session_s": session - imported, "runs_s": times,
        "no_combine_s": no_combine_s,
        "partitions": partitions, "counts": counts}), encoding="utf-8")
    spark.stop()


@dataclass
class PlainResult:
    cold_s: float          # process start -> first result
    python_start_s: float
    import_s: float
    session_s: float
    runs_s: list[float]
    no_combine_s: float | None
    partitions: int
    counts: dict[str, int]
    load: str


def run_plain(children: Children, data: Dataset, runs: int, no_combine: bool) -> PlainResult:
    output = children.log_dir / "plain-result.json"
    meter = LoadMeter()
    child = children.start("plain-pyspark", python_module(
        "benchmarks.wordcount_vs_pyspark", "--plain-child", str(data.path), str(output),
        str(runs), repr(time.time()), "1" if no_combine else "0"))
    code = child.wait()
    children.stop(child)
    if code != 0 or not output.is_file():
        raise RuntimeError(f"plain PySpark exited with {code}; see "
                           f"{children.log_dir}/plain-pyspark.log")
    result = json.loads(output.read_text(encoding="utf-8"))
    cold = (result["python_start_s"] + result["import_s"] + result["session_s"]
            + result["runs_s"][0])
    return PlainResult(cold, result["python_start_s"], result["import_s"],
                       result["session_s"], result["runs_s"], result["no_combine_s"],
                       result["partitions"],
                       result["counts"], meter.stop().describe())


# -- (b) clusterdeck ---------------------------------------------------------------------------


@dataclass
class StageTimes:
    """From one job's ExecutionStateEvents (the JobManager's clock), seconds from the
    first event."""

    vertex: str
    name: str
    subtasks: int
    first_scheduled: float
    first_running: float
    last_finished: float
    attempt_runtimes: list[float]   # RUNNING -> FINISHED of each finished attempt


def stage_times(events: Sequence[Any], names: dict[str, str]) -> list[StageTimes]:
    from clusterdeck.core.protocol.states import ExecutionState
    S = ExecutionState
    if not events:
        return []
    origin = min(e.at for e in events)
    by_vertex: dict[str, list[Any]] = {}
    for event in events:
        by_vertex.setdefault(event.vertex_id, []).append(event)
    stages = []
    for vertex, group in by_vertex.items():
        def first(state: ExecutionState, group: list[Any] = group) -> float:
            return min((e.at for e in group if e.new == state), default=float("nan")) - origin

        running = {e.attempt_id: e.at for e in group if e.new == S.RUNNING}
        runtimes = [e.at - running[e.attempt_id] for e in group
                    if e.new == S.FINISHED and e.attempt_id in running]
        stages.append(StageTimes(
            vertex, names.get(vertex, vertex), len({e.subtask for e in group}),
            first(S.SCHEDULED), first(S.RUNNING),
            max((e.at for e in group if e.new == S.FINISHED), default=float("nan")) - origin,
            runtimes))
    return sorted(stages, key=lambda s: s.first_scheduled)


@dataclass
class ClusterJob:
    label: str
    wall_s: float          # submit call -> result in hand (cold: from cluster start)
    duration_s: float      # JobResult.duration
    rows_s: float          # reading the collected rows
    stages: list[StageTimes]
    records: dict[str, Any]
    counts: dict[str, int]
    load: float


@dataclass
class ClusterResult:
    started_s: float
    jobs: list[ClusterJob] = field(default_factory=list)
    load: str = ""


def run_cluster(data: Dataset, warm_runs: int, recorder: bool = True) -> ClusterResult:
    from benchmarks.submit_latency import bench_cluster, write_job
    from clusterdeck.core.client.jobclient import collected_rows
    from clusterdeck.core.protocol.states import JobStatus
    meter = LoadMeter()
    begin = time.monotonic()
    with bench_cluster("wordcount", **{"taskmanager.count": 2, "taskmanager.slots": 1,
                                       "recorder.enabled": recorder}) as bench:
        outcome = ClusterResult(bench.started_s)
        job = write_job(bench.jobs_dir, "wordcount_bench", WORDCOUNT_JOB)
        for index in range(1 + warm_runs):
            load = os.getloadavg()[0]
            job_id, result, wall = bench.run_job(job, (str(data.path), "2"))
            if result.status != JobStatus.FINISHED:
                raise RuntimeError(f"job {job_id} ended {result.status}: {result.root_cause}")
            read = time.monotonic()
            counts = {word: count for word, count in collected_rows(result)}
            rows_s = time.monotonic() - read
            if index == 0:
                wall = time.monotonic() - begin
            names = _vertex_names(job, data)
            stages = stage_times(bench.events.executions(job_id), names)
            label = "cold (cluster start + job)" if index == 0 else f"warm {index}"
            outcome.jobs.append(ClusterJob(label, wall, result.duration or 0.0, rows_s,
                                           stages, result.records, counts, load))
            print(f"  clusterdeck {label}: {wall:.1f} s wall, duration "
                  f"{result.duration:.1f} s (load {load:.1f})", file=sys.stderr)
            bench.events.forget(job_id)
    outcome.load = meter.stop().describe()
    return outcome


def _vertex_names(job: Path, data: Dataset) -> dict[str, str]:
    from clusterdeck.core.jobapi.loader import load_job
    graph = load_job(job, [str(data.path), "2"]).graph
    return {v.id: v.name for v in graph.vertices}


# -- where the time goes: per-record costs of the exchange, and worker profiles ---------------


def record_costs(data: Dataset, sample_words: int = 200_000) -> dict[str, float]:
    """Microseconds per record of the Python steps the exchange adds per (word, 1) pair,
    measured here (one core, no Spark): what the plain job does not do per word."""
    from clusterdeck.core.engine.records import decode_record_row, encode_record, key_string
    words = data.path.read_text(encoding="ascii")[:sample_words * 8].split()[:sample_words]
    pairs = [(w, 1) for w in words]

    def per_record(fn: Any, items: list[Any]) -> float:
        started = time.perf_counter()
        for item in items:
            fn(item)
        return 1e6 * (time.perf_counter() - started) / len(items)
    encoded = [(encode_record(pair),) for pair in pairs]
    return {
        "encode_record((w, 1))": per_record(encode_record, pairs),
        "key_string(w)": per_record(key_string, words),
        "decode_record_row(row)": per_record(decode_record_row, encoded),
        "line.split() per word (for scale)": 1e6 * _split_cost(data),
    }


def _split_cost(data: Dataset) -> float:
    with open(data.path, encoding="ascii") as handle:
        lines = [handle.readline() for _ in range(50_000)]
    started = time.perf_counter()
    words = sum(len(line.split()) for line in lines)
    return (time.perf_counter() - started) / max(1, words)


def profile_child(input_path: str, job_path: str, work: str, output: str) -> None:
    """In a child: cProfile of Spark's Python workers, plain pipeline vs run_local."""
    import cProfile  # noqa: F401  (spark.python.profile uses it)
    import io
    import pstats
    from contextlib import redirect_stdout
    from operator import add
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from clusterdeck.core.engine.local import run_local
    from clusterdeck.core.jobapi.loader import load_job
    report: dict[str, Any] = {}
    for label in ("plain", "runtime"):
        spark = (SparkSession.builder.master("local[2]").appName(f"profile-{label}")
                 .config("spark.ui.enabled", "false")
                 .config("spark.python.profile", "true").getOrCreate())
        spark.sparkContext.setLogLevel("WARN")
        sc = spark.sparkContext
        started = time.monotonic()
        if label == "plain":
            sc.textFile(input_path).flatMap(lambda line: line.split()) \
                .map(lambda word: (word, 1)).reduceByKey(add).collect()
        else:
            run_local(load_job(job_path, [input_path, "2"]), spark, work)
        elapsed = time.monotonic() - started
        stats = None
        for _rdd_id, profiler in sc.profiler_collector.profilers:
            part = profiler.stats()
            if part is None:
                continue
            if stats is None:
                stats = pstats.Stats(part)
            else:
                stats.add(part)
        text = io.StringIO()
        if stats is not None:
            stats.stream = text  # type: ignore[attr-defined]
            with redirect_stdout(text):
                stats.sort_stats("tottime").print_stats(18)
        report[label] = {"wall_s": elapsed, "profile": text.getvalue(),
                         "worker_cpu_s": getattr(stats, "total_tt", 0.0)}
        spark.stop()
    Path(output).write_text(json.dumps(report), encoding="utf-8")


def run_profile(children: Children, data: Dataset, jobs_dir: Path) -> dict[str, Any]:
    from benchmarks.submit_latency import write_job
    sample = jobs_dir / "slice.txt"
    with open(data.path, "rb") as source, open(sample, "wb") as out:
        out.write(source.read(64_000_000))
        out.write(source.readline())
    job = write_job(jobs_dir, "wordcount_profile", WORDCOUNT_JOB)
    output = children.log_dir / "profile.json"
    child = children.start("profile", python_module(
        "benchmarks.wordcount_vs_pyspark", "--profile-child", str(sample), str(job),
        str(jobs_dir / "work"), str(output)))
    code = child.wait()
    children.stop(child)
    if code != 0:
        raise RuntimeError(f"the profile child exited with {code}; see "
                           f"{children.log_dir}/profile.log")
    return json.loads(output.read_text(encoding="utf-8"))


# -- the report --------------------------------------------------------------------------------


def check_counts(truth: dict[str, int], counts: dict[str, int]) -> str:
    if counts == truth:
        return "identical"
    missing = len(set(truth) - set(counts))
    wrong = sum(1 for w in truth if w in counts and counts[w] != truth[w])
    return f"DIFFERENT ({missing} words missing, {wrong} counts wrong)"


def report(data: Dataset, plain: PlainResult | None, cluster: ClusterResult | None,
           costs: dict[str, float] | None, profile: dict[str, Any] | None) -> str:
    made = f"generated in {data.generated_s:.0f} s" if data.generated_s else "reused"
    out = [f"Machine: {machine_summary()}; PySpark {_pyspark_version()}, {_java_version()}.",
           f"Input: {data.bytes / 1e6:,.0f} MB, {data.lines:,} lines, {data.words:,} words, "
           f"{len(data.counts):,} distinct ({made}).",
           ""]
    truth = data.counts
    sample = sorted(truth, key=lambda w: -truth[w])
    probe = sample[:2] + sample[len(sample) // 2:len(sample) // 2 + 1] + sample[-1:]
    rows = []
    if plain is not None:
        rows.append(("plain PySpark local[2]", "cold (process start + Spark + run 1)",
                     f"{plain.cold_s:.1f}", "", plain.load))
        for index, seconds in enumerate(plain.runs_s[1:], 2):
            rows.append(("plain PySpark local[2]", f"warm (run {index}, same session)",
                         f"{seconds:.1f}", "", plain.load))
        if plain.no_combine_s is not None:
            rows.append(("plain PySpark local[2]", "warm, no map-side combine "
                         "(partitionBy(2) before reduceByKey)", f"{plain.no_combine_s:.1f}", "",
                         plain.load))
    if cluster is not None:
        for job in cluster.jobs:
            rows.append(("clusterdeck 2 TM x 1 slot", job.label, f"{job.wall_s:.1f}",
                         f"{job.duration_s:.1f}", f"{job.load:.1f}"))
    out += [markdown_table(["system", "run", "wall s", "JobResult.duration s",
                            "CPU busy / load"], rows), ""]
    if plain is not None:
        out.append(f"Plain cold = Python start {plain.python_start_s:.1f} s + pyspark import "
                   f"{plain.import_s:.1f} s + SparkSession {plain.session_s:.1f} s + run 1 "
                   f"{plain.runs_s[0]:.1f} s; textFile gave {plain.partitions} partitions.")
    if cluster is not None:
        out.append(f"clusterdeck cold: cluster start to both TaskManagers registered "
                   f"{cluster.started_s:.1f} s; machine during the cluster part "
                   f"{cluster.load}.")
    check_rows = [("truth (generator)", f"{data.words:,}",
                   *[f"{truth[w]:,}" for w in probe], "")]
    if plain is not None:
        check_rows.append(("plain PySpark", f"{sum(plain.counts.values()):,}",
                           *[f"{plain.counts.get(w, 0):,}" for w in probe],
                           check_counts(truth, plain.counts)))
    if cluster is not None:
        for job in cluster.jobs:
            check_rows.append((f"clusterdeck {job.label}", f"{sum(job.counts.values()):,}",
                               *[f"{job.counts.get(w, 0):,}" for w in probe],
                               check_counts(truth, job.counts)))
    out += ["", markdown_table(["counts from", "total", *[f"`{w}`" for w in probe],
                                "all 10,000 vs truth"], check_rows), ""]
    if plain is not None and cluster is not None and len(cluster.jobs) > 1:
        warm_cd = [j.wall_s for j in cluster.jobs[1:]]
        warm_plain = plain.runs_s[1:]
        ratio = median(warm_cd) / median(warm_plain)
        met = "met" if ratio <= 1.2 else "missed"
        out.append(f"**Target (clusterdeck warm <= 1.2 x plain warm): {met}**: median warm "
                   f"{median(warm_cd):.1f} s vs {median(warm_plain):.1f} s = {ratio:.2f} x "
                   f"(by JobResult.duration: "
                   f"{median([j.duration_s for j in cluster.jobs[1:]]) / median(warm_plain):.2f}"
                   " x).")
    if cluster is not None:
        stage_rows = []
        for job in cluster.jobs:
            for stage in job.stages:
                runtimes = ", ".join(f"{r:.1f}" for r in stage.attempt_runtimes)
                stage_rows.append((job.label, f"{stage.vertex} ({stage.name})", stage.subtasks,
                                   f"{stage.first_scheduled:.2f}", f"{stage.first_running:.2f}",
                                   f"{stage.last_finished:.2f}", runtimes))
        records = cluster.jobs[-1].records
        out += ["", "Stages of the clusterdeck jobs (s from the job's first event, the "
                "JobManager's clock):", "",
                markdown_table(["job", "vertex", "subtasks", "first SCHEDULED",
                                "first RUNNING", "last FINISHED",
                                "RUNNING -> FINISHED per attempt"], stage_rows), "",
                "Records per vertex (last job): " + ", ".join(
                    f"{v}: {r['in']:,} in, {r['out']:,} out" for v, r in records.items()) + "."]
    if costs is not None:
        out += ["", "Per-record Python cost of the exchange (µs, measured in this process, "
                "one core, no Spark):", "",
                markdown_table(["step", "µs per record"],
                               [(k, f"{v:.2f}") for k, v in costs.items()])]
    if profile is not None:
        for label, part in profile.items():
            path = ("plain pipeline" if label == "plain"
                    else "clusterdeck.core.engine.local.run_local")
            out += ["", f"cProfile of Spark's Python workers, {label} ({path}, "
                    f"64 MB, local[2]): wall {part['wall_s']:.1f} s, worker CPU in profile "
                    f"{part['worker_cpu_s']:.1f} s", "", "```", part["profile"].strip(), "```"]
    return "\n".join(out)


def _pyspark_version() -> str:
    from importlib.metadata import version
    return version("pyspark")


def _java_version() -> str:
    try:
        result = subprocess.run(["java", "-version"], capture_output=True, text=True,
                                check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "Java unknown"
    first = (result.stderr or result.stdout).splitlines()[0]
    return "Java " + first.split('"')[1] if '"' in first else first


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--plain-child":
        plain_child(argv[1], argv[2], int(argv[3]), float(argv[4]), argv[5] == "1")
        return 0
    if argv and argv[0] == "--profile-child":
        profile_child(*argv[1:5])
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.wordcount_vs_pyspark",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 MB instead of 1,000")
    parser.add_argument("--size-mb", type=int, help="input size in MB (default 1000)")
    parser.add_argument("--keep", action="store_true", help="keep the generated input")
    parser.add_argument("--warm-runs", type=int, default=1,
                        help="warm runs after the cold one, both systems (default 1)")
    parser.add_argument("--no-combine", action="store_true",
                        help="one more plain run without map-side combining")
    parser.add_argument("--skip-plain", action="store_true")
    parser.add_argument("--skip-cluster", action="store_true")
    parser.add_argument("--no-recorder", action="store_true", help="run the cluster "
                        "without its flight recorder (recorder.enabled = false)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile Spark's Python workers (plain vs runtime)")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    size = args.size_mb or (100 if args.quick else 1000)
    data = dataset(size)
    print(f"  input: {data.path} ({data.bytes / 1e6:,.0f} MB; "
          f"{f'generated in {data.generated_s:.0f} s' if data.generated_s else 'reused'})",
          file=sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix="clusterdeck-bench-wc-"))
    plain = cluster = profile = None
    try:
        with Children(scratch / "logs") as children:
            if not args.skip_plain:
                plain = run_plain(children, data, 1 + args.warm_runs, args.no_combine)
                print(f"  plain: cold {plain.cold_s:.1f} s, runs "
                      f"{', '.join(f'{s:.1f}' for s in plain.runs_s)} s", file=sys.stderr)
            if not args.skip_cluster:
                cluster = run_cluster(data, args.warm_runs, not args.no_recorder)
            costs = record_costs(data)
            if args.profile:
                profile = run_profile(children, data, scratch)
        print(report(data, plain, cluster, costs, profile))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(data.folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
