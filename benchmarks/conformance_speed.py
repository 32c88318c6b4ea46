"""Speed of pyspark's own examples: clusterdeck submit on a warm cluster against spark-submit.

Issue 14's targets, over the conformance subset that CI runs (tests/integration/
test_conformance.py): end to end, ``clusterdeck submit`` faster than ``spark-submit``
for every program (spark-submit pays a JVM and a SparkContext each time); the job's own
time within 1.1x of spark-submit's. Per program and round, both run one after the other
from the pyspark folder, as in ``benchmarks.conformance``:

- **end to end**: the command's wall time, start to exit;
- **job time**: under spark-submit, from the moment the script's SparkContext exists to
  the script's end, before the exit hooks stop Spark (a timer wrapped around the driver:
  what is left once the JVM and the context are up); under clusterdeck, the job's
  duration as the JobManager records it (``clusterdeck result JOB --json``: from the
  job's start to its end, scheduling and deployment included).

    python -m benchmarks.conformance_speed [--rounds 3] [--only GLOB ...]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import conformance
from benchmarks._harness import machine_summary, markdown_table
from benchmarks.conformance import PYSPARK_HOME, Cluster, Program, Run

SUBSET = ("wordcount.py", "ml/dataframe_example.py", "ml/sql_transformer.py",
          "ml/logistic_regression_with_elastic_net.py", "pi.py")

TIMER = """\
import os, runpy, sys, time
from pyspark import context

_init, _started = context.SparkContext.__init__, []

def _timed_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _started.append(time.monotonic())

context.SparkContext.__init__ = _timed_init

def _report():
    if _started:
        with open(os.environ["CONFORMANCE_JOB_TIME"], "w") as out:
            out.write(str(time.monotonic() - _started[0]))

sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:  # the script's end, before the exit hooks stop Spark
    _report()
"""


def timed_spark_submit(entry: Program, timeout: float) -> tuple[Run, float | None]:
    """spark-submit's run and the time its script spent once its SparkContext existed."""
    with tempfile.TemporaryDirectory(prefix="conformance-speed-") as folder:
        timer, job_time = Path(folder, "timer.py"), Path(folder, "job-time")
        timer.write_text(TIMER, encoding="utf-8")
        driver = Path(folder, "python")
        driver.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{timer}" "$@"\n',
                          encoding="utf-8")
        driver.chmod(0o755)
        env = conformance.command_env(PYSPARK_DRIVER_PYTHON=str(driver),
                                      CONFORMANCE_JOB_TIME=str(job_time))
        with conformance.cleaned(PYSPARK_HOME):
            run = conformance.run_command(
                [str(conformance.BIN / "spark-submit"), "--master", "local[2]", entry.path,
                 *entry.args], PYSPARK_HOME, env, timeout)
        seconds = float(job_time.read_text()) if job_time.exists() else None
    return run, seconds


def timed_submit(cluster: Cluster, entry: Program, timeout: float) -> tuple[Run, float | None]:
    """clusterdeck's run and the job's duration as the JobManager recorded it."""
    run = cluster.submit(entry, timeout)
    found = re.search(r"job (\S+) submitted", run.stderr)
    if found is None:
        return run, None
    answer = conformance.run_command(
        cluster.command("result", found.group(1), "--cluster", cluster.cluster_id, "--json"),
        cluster.home, cluster.env, 60)
    try:
        return run, float(json.loads(answer.stdout)["duration"])
    except (ValueError, KeyError, TypeError):
        return run, None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", metavar="GLOB")
    parser.add_argument("--timeout", type=float, default=conformance.DEFAULT_TIMEOUT)
    args = parser.parse_args(argv)
    names = conformance.selected(args.only) if args.only else list(SUBSET)
    times: dict[str, dict[str, list[float]]] = {
        name: {"ss": [], "ss_job": [], "cd": [], "cd_job": []} for name in names}
    print(f"{machine_summary()}; {args.rounds} rounds\n", flush=True)
    with Cluster() as cluster:
        for round_number in range(args.rounds):
            for name in names:
                entry = conformance.program(name)
                reference, reference_job = timed_spark_submit(entry, args.timeout)
                candidate, candidate_job = timed_submit(cluster, entry, args.timeout)
                if reference.exit_code != 0 or candidate.exit_code != 0:
                    print(f"round {round_number}: {name} failed: {reference.describe()} | "
                          f"{candidate.describe()}", file=sys.stderr)
                    continue
                row = times[name]
                row["ss"].append(reference.seconds)
                row["cd"].append(candidate.seconds)
                for key, value in (("ss_job", reference_job), ("cd_job", candidate_job)):
                    if value is not None:
                        row[key].append(value)
                print(f"round {round_number}: {name}: e2e {reference.seconds:.1f} | "
                      f"{candidate.seconds:.1f} s, job {reference_job} | {candidate_job}",
                      file=sys.stderr, flush=True)
    print(markdown_table(("program", "spark-submit e2e s", "clusterdeck e2e s",
                          "e2e faster", "spark-submit job s", "clusterdeck job s",
                          "job ratio", "within 1.1x"), [_row(n, t) for n, t in times.items()]))
    return 0


def _row(name: str, t: dict[str, list[float]]) -> list[str]:
    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None
    ss, cd, ss_job, cd_job = (median(t[k]) for k in ("ss", "cd", "ss_job", "cd_job"))
    ratio = cd_job / ss_job if cd_job is not None and ss_job else None

    def shown(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"
    return [f"`{name}`", shown(ss), shown(cd),
            "-" if ss is None or cd is None else ("yes" if cd < ss else "no"),
            shown(ss_job), shown(cd_job), shown(ratio, 2),
            "-" if ratio is None else ("yes" if ratio <= 1.1 else "no")]


if __name__ == "__main__":
    sys.exit(main())
