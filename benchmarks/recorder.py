"""The flight recorder: its size on an idle cluster, and how long a big recording takes
to open.

(a) idle: a warm LocalCluster (2 TaskManagers x 2 slots, heartbeats at their defaults)
    runs no job for ``--idle`` seconds; what the recorder stored in that time (messages,
    payload bytes, log lines, samples) is scaled to an hour.
(b) open: a recording of ``--events`` messages, made of the payloads a real job left in
    (a)'s cluster (its events, snapshots, RPC messages, heartbeats, repeated), is opened
    the way an offline reader opens one: ``describe`` (span, counts, how each job ended),
    then every message read and decoded with the wire codec as the window reads it
    (``replay``: the last message of each state topic, every other message). Target
    < 2 s for 100,000.

The recorder's cost on the control plane is measured by ``control_plane`` with and
without ``--no-recorder``, interleaved (docs/benchmarks.md).

    python -m benchmarks.recorder [--idle 60] [--events 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import exit_on_sigterm, machine_summary, markdown_table
from benchmarks.submit_latency import bench_cluster, write_job
from clusterdeck.core.config import paths
from clusterdeck.core.recorder.export import describe
from clusterdeck.core.recorder.replay import replay
from clusterdeck.core.recorder.store import (
    FILE_NAME,
    Message,
    RecordingStore,
    connect,
    messages,
)
from clusterdeck.core.rpc.mqtt import Traffic

SMALL_JOB = """\
def build(env):
    env.set_job_name("recorded")
    env.from_range(0, 1000, name="numbers", parallelism=8).map(lambda x: x * 2,
        name="double").collect(name="doubled")
"""


def recorded_between(recording: Path, began: float, ended: float) -> dict[str, float]:
    with closing(connect(recording, readonly=True)) as db:
        count, size = db.execute("SELECT count(*), coalesce(sum(length(payload)), 0) FROM "
                                 "messages WHERE at BETWEEN ? AND ?", (began, ended)).fetchone()
        lines, text = db.execute("SELECT count(*), coalesce(sum(length(line)), 0) FROM logs "
                                 "WHERE at BETWEEN ? AND ?", (began, ended)).fetchone()
        samples = db.execute("SELECT count(*) FROM metrics WHERE at BETWEEN ? AND ?",
                             (began, ended)).fetchone()[0]
    return {"messages": count, "payload": size, "lines": lines, "text": text,
            "samples": samples}


def idle_and_sample(idle_s: float) -> tuple[dict[str, float], list[Message]]:
    """(a), and the messages of one small job for (b)."""
    with bench_cluster("recorder", **{"spark.start": "lazy"}) as bench:
        recording = paths.cluster_dir(bench.cluster.cluster_id) / FILE_NAME
        time.sleep(2.0)
        began = time.time()
        time.sleep(idle_s)
        ended = time.time()
        time.sleep(0.5)
        idle = recorded_between(recording, began, ended)
        job = write_job(bench.jobs_dir, "recorded", SMALL_JOB)
        job_began = time.time()
        bench.run_job(job, (), timeout=300.0)
        time.sleep(1.0)
        with closing(connect(recording, readonly=True)) as db:
            sample = [m for m in messages(db) if m.at >= job_began]
    hour = {key: value * 3600.0 / idle_s for key, value in idle.items()}
    return hour, sample


def open_big(sample: list[Message], events: int, folder: Path) -> dict[str, float]:
    """(b): a recording of ``events`` messages made of ``sample``, opened and decoded."""
    path = folder / "big.sqlite"
    store = RecordingStore(path, "bench", max_bytes=2**40, max_age=1e12)
    rows = [Message(1e9 + i * 0.001, m.topic, m.payload)
            for i, m in zip(range(events), _cycle(sample), strict=False)]
    store.add(rows, [])
    store.close()
    started = time.perf_counter()
    summary = describe(path)
    described = time.perf_counter() - started
    decoded = failed = 0
    for item in replay(path):  # what the window reads and decodes
        decoded += 1
        failed += isinstance(item, Traffic) and bool(item.error)
    total = time.perf_counter() - started
    return {"events": summary.messages, "describe_s": described, "open_s": total,
            "decoded": decoded, "undecodable": failed, "mb": path.stat().st_size / 1e6}


def _cycle(items: list[Message]):
    while True:
        yield from items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recorder",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=float, default=60.0, help="idle seconds (60)")
    parser.add_argument("--events", type=int, default=100_000, help="messages in (b)")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    hour, sample = idle_and_sample(args.idle)
    with tempfile.TemporaryDirectory() as folder:
        opened = open_big(sample, args.events, Path(folder))
    print(f"Machine: {machine_summary()}.\n")
    print(markdown_table(
        ["idle cluster, per hour", "messages", "payload MB", "log lines", "log MB",
         "samples"],
        [(f"({args.idle:.0f} s measured)", f"{hour['messages']:,.0f}",
          f"{hour['payload'] / 1e6:.1f}", f"{hour['lines']:,.0f}",
          f"{hour['text'] / 1e6:.2f}", f"{hour['samples']:,.0f}")]))
    print()
    verdict = "met" if opened["open_s"] < 2.0 else "missed"
    print(markdown_table(
        ["recording", "file MB", "describe s", "describe + read as the window does s",
         "undecodable", "target < 2 s"],
        [(f"{opened['events']:,} messages ({len(sample)} distinct, from one job)",
          f"{opened['mb']:.0f}", f"{opened['describe_s']:.2f}", f"{opened['open_s']:.2f}",
          f"{opened['undecodable']:,.0f}", verdict)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
