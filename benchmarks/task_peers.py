"""The peers of the control-plane benchmark: how many no-op tasks a second Dask and Ray
schedule on this machine, measured the way issue 15 names.

- ``dask.distributed``: a ``LocalCluster`` of 2 worker processes x 2 threads; N no-op
  tasks submitted at once (``client.map``, ``pure=False``) and gathered;
- Ray: ``ray.init`` locally with 4 CPUs; N no-op remote tasks, then ``ray.get``.

Each peer runs in a fresh Python process of its own (so neither warms the other), and
its cluster is started before the clock starts: the time is submit to all gathered, as
for clusterdeck's job on a warm cluster. Both come from the ``bench`` extra
(``pip install -e '.[bench]'``), never from the product's dependencies; a peer that is
not installed is reported as such.

    python -m benchmarks.task_peers [--tasks 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

DASK = """
import json, sys, time
from dask.distributed import Client, LocalCluster
def noop(i):
    return i
n, rounds = int(sys.argv[1]), int(sys.argv[2])
with LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                  dashboard_address=None) as cluster, Client(cluster) as client:
    client.gather(client.map(noop, range(10), pure=False))  # warm
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        assert sum(client.gather(client.map(noop, range(n), pure=False))) == n * (n - 1) // 2
        times.append(time.perf_counter() - started)
print(json.dumps(times))
"""

RAY = """
import json, sys, time
import ray
ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
@ray.remote
def noop(i):
    return i
n, rounds = int(sys.argv[1]), int(sys.argv[2])
ray.get([noop.remote(i) for i in range(10)])  # warm
times = []
for _ in range(rounds):
    started = time.perf_counter()
    assert sum(ray.get([noop.remote(i) for i in range(n)])) == n * (n - 1) // 2
    times.append(time.perf_counter() - started)
ray.shutdown()
print(json.dumps(times))
"""

PEERS = {"dask.distributed (2 workers x 2 threads)": DASK, "Ray (4 CPUs)": RAY}


def measure(code: str, tasks: int, rounds: int) -> list[float] | str:
    """Seconds per round, or why the peer could not be measured."""
    done = subprocess.run([sys.executable, "-c", code, str(tasks), str(rounds)],
                          capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"not measured: {last}"
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def peer_rates(tasks: int, rounds: int) -> dict[str, list[float] | str]:
    """Per peer, tasks per second in each round (or why not measured)."""
    rates: dict[str, list[float] | str] = {}
    for name, code in PEERS.items():
        times = measure(code, tasks, rounds)
        rates[name] = times if isinstance(times, str) else [tasks / t for t in times]
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for name, rates in peer_rates(args.tasks, args.rounds).items():
        shown = rates if isinstance(rates, str) else ", ".join(f"{r:.0f}" for r in rates)
        print(f"{name}: {shown} tasks/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
