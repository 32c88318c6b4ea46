"""The 1 GB word count across two TaskManagers that share no folder, against the same on
one shared folder (issue 13's benchmark).

Same input and job as ``wordcount_vs_pyspark`` (seeded 1,000 MB, parallelism 2), two
TaskManagers x 1 slot, Spark started eagerly, in one run:

- **shared**: both TaskManagers started by the cluster on this machine: every result
  partition is read from the shared disk;
- **no shared folder**: the JobManager starts none, and two TaskManagers join with
  exported credentials, each in a mount namespace of its own under a tmpfs over the
  clusterdeck home (tests/integration/namespaces.py): a consumer fetches the other
  TaskManager's partitions over its data service, and the JobManager fetches the
  collected rows.

Each setup runs the job cold (the TaskManagers' JVMs warming up) and ``--warm`` times
more; counts are checked against the generator's. Needs root and ``unshare``.

    python -m benchmarks.wordcount_no_shared_folder [--size-mb 1000] [--warm 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import machine_summary, markdown_table
from benchmarks.submit_latency import bench_cluster, write_job
from benchmarks.wordcount_vs_pyspark import WORDCOUNT_JOB, check_counts, dataset
from clusterdeck.core.client.jobclient import collected_rows
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.namespaces import namespaced_taskmanagers

SETUP = {"taskmanager.slots": 1, "spark.start": "eager"}


def run_setup(name: str, data_path: Path, truth: dict[str, int], warm: int,
              namespaced: bool) -> list[tuple[str, str, float, float, str]]:
    rows = []
    local = 0 if namespaced else 2
    tag = name.replace(" ", "-")
    with bench_cluster(f"nsf-{tag}", **{**SETUP, "taskmanager.count": local}) as bench, \
            tempfile.TemporaryDirectory(prefix="nsf-") as folder:
        joined = namespaced_taskmanagers(bench.cluster, 2 if namespaced else 0, Path(folder),
                                         SETUP)
        with joined as taskmanagers:
            bench.observer.wait_registered_now({t.id for t in taskmanagers}, 120.0)
            job = write_job(bench.jobs_dir, "wordcount_bench", WORDCOUNT_JOB)
            for index in range(1 + warm):
                job_id, result, wall = bench.run_job(job, (str(data_path), "2"))
                if result.status is not JobStatus.FINISHED:
                    raise RuntimeError(f"{name}: job {job_id} {result.status}: "
                                       f"{result.root_cause}")
                counts = {word: count for word, count in collected_rows(result)}
                label = "cold" if index == 0 else f"warm {index}"
                rows.append((name, label, wall, result.duration or 0.0,
                             check_counts(truth, counts)))
                print(f"  {name} {label}: {wall:.1f} s", file=sys.stderr, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--warm", type=int, default=1)
    args = parser.parse_args()
    data = dataset(args.size_mb)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = run_setup("shared folder", data.path, data.counts, args.warm, namespaced=False)
    rows += run_setup("no shared folder", data.path, data.counts, args.warm, namespaced=True)
    print(f"{machine_summary()}; {started}; {data.bytes / 1e6:.0f} MB, {data.lines} lines\n")
    print(markdown_table(("setup", "run", "wall s", "JobResult.duration s", "counts"),
                         [(n, r, f"{w:.1f}", f"{d:.1f}", c) for n, r, w, d, c in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
