"""Rescaling: the time of ``clusterdeck rescale`` (savepoint to running at the new
parallelism) against the keyed state's size.

On a warm LocalCluster (2 TaskManagers x 2 slots, Spark eager, the state backend given) a
streaming job keeps a value per key for ``--keys`` keys (``rate_source -> key_by(index
mod keys) -> process`` counting each key's records, emitting nothing), at parallelism 2.
Once every key has a value (the source has emitted ``keys`` records and a checkpoint
passed), ``core/client/rescale.py`` moves it to parallelism 1, and the times of its
steps are measured from the request: savepoint written, old job FINISHED, every subtask
of the new job RUNNING, and the new job's first checkpoint completed (its state was
restored: the keys of every old subtask merged into one). Then the savepoint's keys are
counted (heap: the values in its snapshots) and the job is cancelled.

    python -m benchmarks.rescale [--keys 10000 100000] [--backend heap|rocksdb] [--rate N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import LoadMeter, exit_on_sigterm, machine_summary, markdown_table
from benchmarks.submit_latency import bench_cluster, write_job
from clusterdeck.core.client.rescale import all_running, rescale

COUNTING_JOB = """
def count(record, state):
    state.update((state.value() or 0) + 1)


def build(env):
    keys = int(env.args[1])
    env.enable_checkpointing(1.0)
    (env.rate_source(float(env.args[2]))
        .key_by(lambda record: record[0] % keys)
        .process(count)
        .write_text(env.args[0]))
"""


def wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise TimeoutError(f"no {what} within {timeout:g} s")


def savepoint_keys(folder: Path) -> tuple[int, int]:
    """Keys with a value in a heap savepoint's snapshots (0 with rocksdb: in its files), and
    the savepoint's bytes."""
    keys = size = 0
    for path in folder.iterdir():
        size += path.stat().st_size
        if path.suffix == ".state":
            values = (json.loads(path.read_bytes()).get("chain") or {}).get("values")
            keys += len(values) if isinstance(values, list) else 0
    return keys, size


def measure(bench, job: Path, keys: int, rate: float) -> list[object]:
    client = bench.client
    out = bench.jobs_dir / f"out-{keys}"
    args = (str(out), str(keys), str(rate))
    job_id = client.submit(job, args, parallelism=2)
    wait(lambda: (s := client.snapshot(job_id, 1.0)) and all_running(s), 600, "job running")
    filled = time.monotonic() + keys / rate + 2.0
    wait(lambda: time.monotonic() > filled and (s := client.snapshot(job_id, 1.0))
         and s.graph.checkpoints and s.graph.checkpoints.completed >= 2, 900, "state filled")
    load = LoadMeter()
    started = time.monotonic()
    done = rescale(client, job_id, 1, job, args, report=lambda line: print(line, flush=True))
    snapshot_of = lambda: client.snapshot(done.job_id, 1.0)  # noqa: E731
    wait(lambda: (s := snapshot_of()) and s.graph.checkpoints
         and s.graph.checkpoints.completed >= 1, 600, "a checkpoint after the restore")
    restored = time.monotonic() - started
    load.stop()
    client.cancel(done.job_id)
    found, size = savepoint_keys(Path(done.savepoint))
    return [f"{keys:,}", f"{found:,}" if found else "(in files)", f"{size / 1e6:.1f}",
            f"{done.savepoint_taken:.2f}", f"{done.stopped:.2f}", f"{done.running:.2f}",
            f"{restored:.2f}", load.describe()]


def main() -> int:
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--backend", choices=["heap", "rocksdb"], default="heap")
    parser.add_argument("--rate", type=float, default=20_000.0)
    options = parser.parse_args()
    rows = []
    with bench_cluster("rescale", **{"state.backend": options.backend}) as bench:
        job = write_job(bench.jobs_dir, "counting", COUNTING_JOB)
        for keys in options.keys:
            rows.append(measure(bench, job, keys, options.rate))
    print(f"\n{datetime.now():%Y-%m-%d %H:%M}, load average {os.getloadavg()[0]:.2f}; "
          f"{machine_summary()}; state.backend {options.backend}\n")
    print(markdown_table(["keys", "keys in savepoint", "savepoint MB", "savepoint s",
                          "old job finished s", "new job running s",
                          "first checkpoint after restore s", "CPU busy / load"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
