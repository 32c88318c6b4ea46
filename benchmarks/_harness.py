"""What the benchmarks share: a throw-away home, children that die with the benchmark, a
broker run as a real process, a load meter, percentiles and Markdown tables.

Runs on the benchmark's main thread only: children are started from it, and the kernel's
parent-death signal is tied to the thread that forked.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.connection import client_address, read_connection
from clusterdeck.broker.server import wait_ready
from clusterdeck.core.config import paths

REPO_ROOT = Path(__file__).resolve().parent.parent
_PR_SET_PDEATHSIG = 1
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
T = TypeVar("T")


# -- home and signals ----------------------------------------------------------------------


@contextmanager
def fresh_home() -> Iterator[Path]:
    """Point CLUSTERDECK_HOME at a new temp dir for the duration; delete it afterwards."""
    home = Path(tempfile.mkdtemp(prefix="clusterdeck-bench-"))
    previous = os.environ.get(paths.HOME_ENV)
    os.environ[paths.HOME_ENV] = str(home)
    try:
        yield home
    finally:
        if previous is None:
            os.environ.pop(paths.HOME_ENV, None)
        else:
            os.environ[paths.HOME_ENV] = previous
        shutil.rmtree(home, ignore_errors=True)


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so the cleanup in ``finally`` blocks runs."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


# -- child processes -----------------------------------------------------------------------


def _die_with_parent_hook() -> Any:
    prctl, parent = _PRCTL, os.getpid()
    if prctl is None:
        return None

    def die_with_parent() -> None:  # in the forked child, before exec
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)
    return die_with_parent


def child_env() -> dict[str, str]:
    """This environment, with the repository importable from any working directory."""
    python_path = os.environ.get("PYTHONPATH")
    root = str(REPO_ROOT)
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{python_path}" if python_path
            else root, "PYTHONUNBUFFERED": "1"}


class Children:
    """The processes a benchmark started. Each leads its own process group, gets SIGKILL
    from the kernel if the benchmark dies first, and is stopped by ``stop_all``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._processes: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, argv: Sequence[str], *,
              stdout: int | IO[bytes] | None = None,
              stderr: int | IO[bytes] | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv``; output not piped goes to ``<log_dir>/<name>.log``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                list(argv), cwd=REPO_ROOT, env=child_env(), stdin=subprocess.DEVNULL,
                stdout=log if stdout is None else stdout,
                stderr=log if stderr is None else stderr,
                start_new_session=True, preexec_fn=_die_with_parent_hook())
        self._processes.append(process)
        return process

    def stop(self, process: subprocess.Popen[bytes], grace: float = 10.0,
             sig: int = signal.SIGTERM) -> int | None:
        """``sig`` to the process's group, SIGKILL after ``grace``; its exit code."""
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGCONT)  # a stopped process cannot exit
                os.killpg(process.pid, sig)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
        # Whatever the process left behind in its group goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if process in self._processes:
            self._processes.remove(process)
        return process.returncode

    def stop_all(self) -> None:
        for process in reversed(list(self._processes)):
            self.stop(process)

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


# -- brokers -------------------------------------------------------------------------------


@dataclass
class RunningBroker:
    kind: str
    cluster_id: str
    process: subprocess.Popen[bytes]
    startup_s: float

    def address(self, role: str = "jobmanager") -> BrokerAddress:
        """The jobmanager login by default: the benchmarks' own topics (``bench/...``) and
        endpoints are granted to no other role (broker/acl.py)."""
        return client_address(paths.cluster_dir(self.cluster_id), self.cluster_id, role)


def start_broker(children: Children, kind: str, cluster_id: str,
                 timeout: float = 30.0, settings: Sequence[str] = ()) -> RunningBroker:
    """``clusterdeck broker`` for a new cluster; returns once a login is accepted.

    ``settings`` are more ``key=value`` overrides, e.g. ``broker.tls=on``."""
    overrides = [arg for setting in settings for arg in ("-D", setting)]
    return launch_broker(children, kind, cluster_id, python_module(
        "clusterdeck.core.cli", "broker", "-D", f"cluster.id={cluster_id}",
        "-D", f"broker.kind={kind}", *overrides), timeout)


def launch_broker(children: Children, kind: str, cluster_id: str, argv: Sequence[str],
                  timeout: float = 30.0) -> RunningBroker:
    """Run ``argv``, a broker of ``cluster_id`` whose connection file it writes (or that
    was written for it); return once a login is accepted."""
    started = time.monotonic()
    name = f"broker-{kind}-{cluster_id}"
    process = children.start(name, argv)
    cluster_dir = paths.cluster_dir(cluster_id)
    deadline = started + timeout
    while read_connection(cluster_dir) is None:
        if process.poll() is not None:
            raise RuntimeError(f"the {kind} broker exited with {process.returncode}; see "
                               f"{children.log_dir}/{name}.log")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the {kind} broker wrote no connection file in {timeout:g} s")
        time.sleep(0.01)
    broker = RunningBroker(kind, cluster_id, process, 0.0)
    try:
        wait_ready(broker.address(), max(0.1, deadline - time.monotonic()))
    except ConnectionError:
        if process.poll() is not None:
            raise RuntimeError(f"the {kind} broker exited with {process.returncode}; see "
                               f"{children.log_dir}/{name}.log") from None
        raise
    broker.startup_s = time.monotonic() - started
    return broker


# -- measuring the machine ---------------------------------------------------------------------


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


class LoadMeter:
    """Machine-wide CPU use between ``start`` and ``stop``: this benchmark's processes and
    everyone else's (other engineers' test runs) together, in percent of all cores."""

    def __init__(self) -> None:
        self._start = _cpu_times()
        self.busy_percent = 0.0
        self.loadavg = os.getloadavg()[0]

    def stop(self) -> LoadMeter:
        busy0, total0 = self._start
        busy1, total1 = _cpu_times()
        self.busy_percent = 100.0 * (busy1 - busy0) / max(1, total1 - total0)
        self.loadavg = max(self.loadavg, os.getloadavg()[0])
        return self

    def describe(self) -> str:
        return f"{self.busy_percent:.0f}% / {self.loadavg:.2f}"


def machine_summary() -> str:
    """Cores, memory, CPU model and versions: no host name, no path."""
    from importlib.metadata import version

    from clusterdeck.broker import mosquitto
    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as info:
        model = next((line.split(":", 1)[1].strip() for line in info
                      if line.startswith("model name")), model)
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024 ** 3
    mosquitto_version = "not installed"
    binary = mosquitto.find_binary()
    if binary is not None:
        result = subprocess.run([str(binary), "-h"], capture_output=True, text=True,
                                check=False)
        mosquitto_version = (result.stdout or result.stderr).splitlines()[0].split()[-1]
    return (f"{os.cpu_count()} cores ({model}), {memory_gib:.0f} GiB RAM, "
            f"{platform.system()} {platform.release().split('-')[0]}; Python "
            f"{platform.python_version()}, paho-mqtt {version('paho-mqtt')}, amqtt "
            f"{version('amqtt')}, Mosquitto {mosquitto_version}")


# -- numbers and tables -----------------------------------------------------------------------


def poll(condition: Callable[[], T | None], timeout: float, what: str) -> T:
    """The first truthy value of ``condition()``, looked at every 10 ms; TimeoutError
    naming ``what`` past ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:g} s")
        time.sleep(0.01)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of ``values`` (need not be sorted)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return percentile(values, 0.5)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|")
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def kinds_to_run(requested: Sequence[str] | None) -> list[str]:
    """The broker kinds asked for, Mosquitto left out (with a note) when not installed."""
    from clusterdeck.broker import mosquitto
    kinds = list(requested or ["mosquitto", "amqtt"])
    if "mosquitto" in kinds and not mosquitto.is_installed():
        print("note: Mosquitto is not installed; measuring amqtt only", file=sys.stderr)
        kinds.remove("mosquitto")
    return kinds
