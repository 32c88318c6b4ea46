"""Machines that share only a network, on one machine: a Linux bridge, and per machine a
network namespace joined to it by a veth pair.

This machine (the root namespace) holds the bridge's address and plays the JobManager's
machine: its broker binds that address. Each other "machine" is a network namespace
whose one interface, ``eth0``, has an address of the bridge's subnet and a default route
through the bridge's address (so it also reaches this machine's other addresses, as a
LAN's machines reach a host's every address); a TaskManager runs in it, in a mount
namespace of its own too (tests/integration/namespaces.py: ``network=machine.enter``).

A cut is silent, as a pulled cable or a dead switch port: nftables on the machine's
``eth0`` drops every frame (ARP included), in both directions or in one, and nothing
answers (no RST, no ICMP); healing deletes that table. Everything a run makes carries
its pid in its name (bridge ``cdbr<pid>``, namespaces ``cdnet-<pid>-<n>``); a run
removes what it made on exit, whatever happened, and first what runs that were killed
half way left behind (names with a pid that is no longer alive).

Needs root, iproute2 (``ip``, and ``tc`` for a slow link), util-linux (``nsenter``,
``unshare``) and nftables (``nft``, with the netdev family's egress hook: Linux 5.16+);
tests skip, naming what is missing, otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import pytest

PREFIX = "cdnet-"
BRIDGE_PREFIX = "cdbr"
VETH_PREFIX = "cdv"
CUT_TABLE = "clusterdeck_cut"
LOSS_TABLE = "clusterdeck_loss"
PORT_TABLE = "clusterdeck_port"
PEER_TABLE = "clusterdeck_peer"
RELAY_TABLE = "clusterdeck_relay"  # this machine's, per run: its pid follows
ISOLATION_TABLE = "clusterdeck_isolated"  # this machine's, per run: its pid follows
CLOCK_SKEW_SITE = Path(__file__).with_name("clockskew")  # its sitecustomize.py
TOOLS = ("ip", "nsenter", "unshare", "nft", "tc")


class Direction(Enum):
    """Which frames a cut drops, as seen from the machine cut off."""

    BOTH = "both"
    INBOUND = "inbound"    # it sends, but hears nothing
    OUTBOUND = "outbound"  # it hears, but nothing it sends arrives


@dataclass
class Machine:
    """One network namespace on the bridge: ``address`` is its ``eth0``'s."""

    namespace: str
    address: str
    cut_off: Direction | None = field(default=None)
    link: str = ""  # the bridge's end of its veth pair, on this machine (the root namespace)

    @property
    def enter(self) -> list[str]:
        """The command prefix that runs a command on this machine's network."""
        return ["nsenter", f"--net=/run/netns/{self.namespace}"]

    def cut(self, direction: Direction = Direction.BOTH) -> None:
        """Drop every frame on its link (or those of one direction), silently."""
        chains = []
        if direction in (Direction.BOTH, Direction.INBOUND):
            chains.append("ingress")
        if direction in (Direction.BOTH, Direction.OUTBOUND):
            chains.append("egress")
        rules = "".join(
            f' chain {hook} {{\n  type filter hook {hook} device "eth0" priority 0; '
            f'policy drop;\n }}\n' for hook in chains)
        _run(["ip", "netns", "exec", self.namespace, "nft", "-f", "-"],
             stdin=f"table netdev {CUT_TABLE} {{\n{rules}}}\n")
        self.cut_off = direction

    def heal(self) -> None:
        if self.cut_off is not None:
            _run(["ip", "netns", "exec", self.namespace, "nft", "delete", "table", "netdev",
                  CUT_TABLE])
            self.cut_off = None

    def lose(self, percent: int) -> None:
        """Drop ``percent`` % of its frames at random, each way on their own (netem's
        loss, which this kernel lacks, with nftables' random numbers); 0 heals."""
        self._nft_table(LOSS_TABLE, "".join(
            f' chain {hook} {{\n  type filter hook {hook} device "eth0" priority 1; '
            f'numgen random mod 100 < {percent} drop;\n }}\n'
            for hook in ("ingress", "egress")) if percent else "")

    def close_port(self, port: int) -> None:
        """Its TCP ``port`` unreachable one way: what arrives for it is let in, what it
        answers from it never leaves (a firewall of one direction, no RST, no ICMP);
        ``reopen_port`` heals."""
        self._nft_table(PORT_TABLE, ' chain egress {\n  type filter hook egress device '
                        f'"eth0" priority 2; tcp sport {port} drop;\n }}\n')

    def reopen_port(self) -> None:
        self._nft_table(PORT_TABLE, "")

    def part_from(self, address: str) -> None:
        """No frame between it and the machine of ``address``, either way, silently;
        the rest of its link (the broker) untouched. ``rejoin`` heals."""
        self._nft_table(PEER_TABLE, "".join(
            f' chain {hook} {{\n  type filter hook {hook} device "eth0" priority 3; '
            f'ip {end} {address} drop;\n }}\n'
            for hook, end in (("ingress", "saddr"), ("egress", "daddr"))))

    def rejoin(self) -> None:
        self._nft_table(PEER_TABLE, "")

    def _nft_table(self, table: str, chains: str) -> None:
        """The netdev table ``table`` on its ``eth0`` made anew with ``chains``; none
        (the table deleted) when ``chains`` is empty."""
        subprocess.run(["ip", "netns", "exec", self.namespace, "nft", "delete", "table",
                        "netdev", table], capture_output=True, check=False)
        if chains:
            _run(["ip", "netns", "exec", self.namespace, "nft", "-f", "-"],
                 stdin=f"table netdev {table} {{\n{chains}}}\n")

    def throttle(self, rate: str) -> None:
        """Frames to it at most at ``rate`` (tc's units: "512kbit"), as over a slow link,
        so that a transfer to it lasts long enough to be cut half way."""
        _run(["tc", "qdisc", "replace", "dev", self.link, "root", "tbf", "rate", rate,
              "burst", "32kb", "latency", "2s"])

    def unthrottle(self) -> None:
        subprocess.run(["tc", "qdisc", "del", "dev", self.link, "root"], capture_output=True,
                       check=False)

    def run(self, command: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """``command`` on this machine's network (for probes in tests)."""
        return subprocess.run([*self.enter, *command], capture_output=True, text=True,
                              timeout=timeout, check=False)


@dataclass
class Network:
    """The bridge (``gateway`` is this machine's address on it) and the machines on it."""

    bridge: str
    gateway: str
    machines: list[Machine]


class DelayRelay:
    """Latency on the machines' way to the broker, as netem's delay would add (this
    kernel has no netem): nftables redirects their connections to the broker's ``port``
    to this relay, which passes each chunk on ``delay`` seconds after it came, each way
    (``delay`` may change at any time; 0 passes at once). Threads of its own: one
    accepting, two per connection, each chunk queued with when it is due so that a
    stream keeps its throughput, only later."""

    def __init__(self, network: Network, port: int) -> None:
        self.delay = 0.0
        self.target = (network.gateway, port)
        self.table = f"{RELAY_TABLE}{os.getpid()}"
        self._listener = socket.create_server((network.gateway, 0))
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name="delay-relay", daemon=True).start()
        _run(["nft", "-f", "-"], stdin=(
            f"table ip {self.table} {{\n chain prerouting {{\n  type nat hook prerouting "
            f"priority dstnat;\n  iifname \"{network.bridge}\" tcp dport {port} redirect to "
            f":{self._listener.getsockname()[1]};\n }}\n}}\n"))

    def close(self) -> None:
        subprocess.run(["nft", "delete", "table", "ip", self.table], capture_output=True,
                       check=False)
        self._closed.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                inbound, _ = self._listener.accept()
                outbound = socket.create_connection(self.target, timeout=10)
            except OSError:
                continue
            outbound.settimeout(None)
            for source, sink in ((inbound, outbound), (outbound, inbound)):
                chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()
                threading.Thread(target=self._read, args=(source, chunks), daemon=True,
                                 name="delay-relay-in").start()
                threading.Thread(target=self._write, args=(chunks, sink, source),
                                 daemon=True, name="delay-relay-out").start()

    def _read(self, source: socket.socket, chunks: queue.Queue[tuple[float, bytes]]) -> None:
        data = b"x"
        while data:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            chunks.put((time.monotonic() + self.delay, data))

    @staticmethod
    def _write(chunks: queue.Queue[tuple[float, bytes]], sink: socket.socket,
               source: socket.socket) -> None:
        while True:
            due, data = chunks.get()
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                if not data:
                    sink.shutdown(socket.SHUT_WR)
                    return
                sink.sendall(data)
            except OSError:
                for end in (sink, source):
                    end.close()
                return


@contextmanager
def process_cut_from(pid: int, *servers: int,
                     refuse_new: tuple[int, ...] | None = None) -> Iterator[None]:
    """A process of this machine cut off from the local servers on the ports ``servers``
    (the broker; ZooKeeper), silently, while the block runs: every frame of its
    connections to them dropped both ways, and no new connection to the ports
    ``refuse_new`` (default: all of ``servers``) opened, from any process (it would be
    the process's reconnect; the others' stay up, but a process that connects only now,
    a standby that starts to lead, is refused too). A process on the JobManager's machine
    cannot have a network namespace of its own after it started, and nftables here cannot
    tell one process's new sockets from another's, so its sockets are cut instead. New
    connections are told by their SYN, not by conntrack's state: a connection made before
    the first ``ct`` rule would be picked up as "new" mid-stream, and cut for everyone."""
    refused = servers if refuse_new is None else refuse_new
    wanted = " or ".join(f"dport = :{port}" for port in servers)
    listed = subprocess.run(["ss", "-tnpH", "state", "established", f"( {wanted} )"],
                            capture_output=True, text=True, check=False).stdout
    ports = sorted({int(line.split()[2].rsplit(":", 1)[1]) for line in listed.splitlines()
                    if f"pid={pid}," in line})
    assert ports, f"process {pid} has no connection to ports {servers}:\n{listed}"
    table = f"{ISOLATION_TABLE}{os.getpid()}"
    own = ", ".join(map(str, ports))
    _run(["nft", "-f", "-"], stdin=(
        f"table inet {table} {{\n chain output {{\n  type filter hook output priority 0;\n"
        f"  tcp sport {{ {own} }} drop;\n  tcp dport {{ {own} }} drop;\n"
        + (f"  tcp dport {{ {', '.join(map(str, refused))} }} tcp flags & (syn | ack) == syn "
           "drop;\n" if refused else "") + " }\n}\n"))
    try:
        yield
    finally:
        subprocess.run(["nft", "delete", "table", "inet", table], capture_output=True,
                       check=False)


def with_clock_offset(enter: list[str], seconds: float) -> list[str]:
    """The command prefix ``enter`` with every process under it seeing its wall clock
    ``seconds`` off, its monotonic clocks left alone, as on a machine whose clock is set
    wrong: libfaketime preloaded, the build the ``libfaketime`` package ships (Debian's
    0.9.10 makes Python's ``time.sleep`` fail with EINVAL when it leaves the monotonic
    clocks alone, and hangs its timed waits when it does not). What the process starts is
    left out (clockskew/sitecustomize.py): preloaded into Spark's JVM, libfaketime makes it
    start 3-4 times slower, or never, and that JVM keeps no time clusterdeck reads. Skips
    without it."""
    spec = importlib.util.find_spec("libfaketime")
    library = next((Path(folder) / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"
                    for folder in (spec.submodule_search_locations or []) if spec), None)
    if library is None or not library.is_file():
        pytest.skip("no libfaketime.so.1: pip install libfaketime (the test extra has it)")
    python_path = os.pathsep.join(filter(None, [str(CLOCK_SKEW_SITE),
                                                os.environ.get("PYTHONPATH")]))
    return [*enter, "env", f"LD_PRELOAD={library}", f"FAKETIME={seconds:+g}s",
            "FAKETIME_DONT_FAKE_MONOTONIC=1", f"PYTHONPATH={python_path}",
            "PYTHONHASHSEED=0"]  # a TaskManager without it starts itself again, unpreloaded


def skip_unless_network_namespaces() -> None:
    if os.geteuid() != 0:
        pytest.skip("network namespaces, a bridge and nftables need root")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/setup.sh installs them)")


@contextmanager
def bridged_machines(count: int) -> Iterator[Network]:
    """A bridge with ``count`` machines on it, all removed on exit, also on a failure."""
    skip_unless_network_namespaces()
    remove_leftovers()
    pid = os.getpid()
    network = Network(f"{BRIDGE_PREFIX}{pid}", "", [])
    try:
        subnet = _free_subnet(pid)
        network.gateway = f"{subnet}.1"
        try:
            _run(["ip", "link", "add", network.bridge, "type", "bridge"])
        except AssertionError as error:
            pytest.skip(f"this kernel makes no bridge: {error}")
        _run(["ip", "addr", "add", f"{network.gateway}/24", "dev", network.bridge])
        _run(["ip", "link", "set", network.bridge, "up"])
        for index in range(count):
            machine = Machine(f"{PREFIX}{pid}-{index}", f"{subnet}.{index + 2}")
            _run(["ip", "netns", "add", machine.namespace])
            network.machines.append(machine)  # removed on exit from here on
            _join(machine, network, f"{VETH_PREFIX}{pid}m{index}")
        if network.machines:
            _check_cut_works(network.machines[0])
        yield network
    finally:
        for machine in network.machines:
            _remove_link(machine.link)  # both ends now, not when the namespace is freed
            _remove_namespace(machine.namespace)
        _remove_link(network.bridge)
        _wait_links_gone([machine.link for machine in network.machines if machine.link])


def _wait_links_gone(links: list[str], timeout: float = 15.0) -> None:
    """Wait until the kernel has destroyed the removed namespaces' veths: it does so
    after ``ip netns delete`` returns, and the next network of this process reuses their
    names ("RTNETLINK answers: File exists" when a module's network follows another's)."""
    deadline = time.monotonic() + timeout
    for link in links:
        while subprocess.run(["ip", "link", "show", link], capture_output=True,
                             check=False).returncode == 0:
            if time.monotonic() > deadline:
                _remove_link(link)
                break
            time.sleep(0.05)


def _join(machine: Machine, network: Network, veth: str) -> None:
    """A veth pair from the bridge to the machine's ``eth0``, addressed and routed."""
    _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns",
          machine.namespace])
    machine.link = veth
    _run(["ip", "link", "set", veth, "master", network.bridge, "up"])
    inside = ["ip", "netns", "exec", machine.namespace]
    _run([*inside, "ip", "addr", "add", f"{machine.address}/24", "dev", "eth0"])
    _run([*inside, "ip", "link", "set", "eth0", "up"])
    _run([*inside, "ip", "link", "set", "lo", "up"])
    _run([*inside, "ip", "route", "add", "default", "via", network.gateway])


def _check_cut_works(machine: Machine) -> None:
    """A cut and a heal once, before anything runs: a kernel without the netdev egress
    hook skips the test here rather than fail it half way."""
    try:
        machine.cut()
    except AssertionError as error:
        pytest.skip(f"nftables cannot drop this machine's frames (netdev ingress/egress "
                    f"hooks, Linux 5.16+): {error}")
    machine.heal()


def remove_leftovers() -> None:
    """Namespaces and links of runs whose process is gone (killed half way)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=False).stdout
    for name in re.findall(rf"^({PREFIX}(\d+)-\d+)", listed, re.MULTILINE):
        if not _alive(int(name[1])):
            _remove_namespace(name[0])
    tables = subprocess.run(["nft", "list", "tables", "ip"], capture_output=True, text=True,
                            check=False).stdout
    tables += subprocess.run(["nft", "list", "tables", "inet"], capture_output=True,
                             text=True, check=False).stdout
    for family, table, owner in re.findall(
            rf"^table (ip|inet) ((?:{RELAY_TABLE}|{ISOLATION_TABLE})(\d+))$", tables,
            re.MULTILINE):
        if not _alive(int(owner)):
            subprocess.run(["nft", "delete", "table", family, table], capture_output=True,
                           check=False)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           check=False).stdout
    for name, owner in re.findall(rf"^\d+: ((?:{BRIDGE_PREFIX}|{VETH_PREFIX})(\d+)\w*)[@:]",
                                  links, re.MULTILINE):
        if not _alive(int(owner)):
            _remove_link(name)


def _remove_namespace(namespace: str) -> None:
    """Every process still in it killed, then the namespace deleted (its veth with it)."""
    pids = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True,
                          text=True, check=False).stdout.split()
    for pid in pids:
        with suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    subprocess.run(["ip", "netns", "delete", namespace], capture_output=True, check=False)


def _remove_link(name: str) -> None:
    subprocess.run(["ip", "link", "delete", name], capture_output=True, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _free_subnet(pid: int) -> str:
    """A /24 of 10.213.0.0/16 no interface of this machine is on, chosen by ``pid``."""
    used = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True,
                          check=False).stdout
    for step in range(256):
        subnet = f"10.213.{(pid + step) % 256}"
        if f" {subnet}." not in used:
            return subnet
    raise AssertionError("no free /24 in 10.213.0.0/16 for the test bridge")


def _run(command: list[str], stdin: str | None = None) -> None:
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=30,
                          check=False)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(command)}: {done.stderr.strip()}")
