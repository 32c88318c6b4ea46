"""``clusterdeck profile PROCESS``: a thread dump or a flame graph of one of the cluster's
processes on this machine, with py-spy (docs/profiling.md)."""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from clusterdeck.core.config.settings import Config
from clusterdeck.core.node import exitcodes
from clusterdeck.core.profiling.pyspy import (
    FlameNode,
    ProfilingError,
    flame_graph,
    hottest_lines,
    thread_dump,
    thread_lines,
    with_workers,
)


def add_profile_command(commands: argparse._SubParsersAction,
                        common: argparse.ArgumentParser) -> None:
    profile = commands.add_parser("profile", parents=[common], help="a thread dump or a "
                                  "flame graph of a process of the cluster (py-spy)")
    profile.add_argument("process", metavar="PROCESS", help="jobmanager, taskmanager-<n> or "
                         "a pid (of this machine)")
    profile.add_argument("--threads", action="store_true", help="a thread dump, not a "
                         "flame graph")
    profile.add_argument("--seconds", type=float, default=5.0, help="how long to sample "
                         "(default 5, at most 60)")
    profile.add_argument("--rate", type=int, default=100, help="samples a second")
    profile.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the "
                         "collapsed stacks there too (flamegraph.pl, speedscope)")


def cmd_profile(config: Config, args: argparse.Namespace) -> int:
    try:
        pid, name = _pid_of(config, args.process)
        workers = with_workers(name)
        if args.threads:
            for thread in thread_dump(pid, subprocesses=workers):
                print("\n".join(thread_lines(thread)))
            return exitcodes.OK
        print(f"sampling {name} (pid {pid}) for {args.seconds:g} s\u2026", file=sys.stderr)
        graph = flame_graph(pid, args.seconds, args.rate, subprocesses=workers)
    except ProfilingError as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return exitcodes.FAILED
    print(f"{graph.root.samples:,} samples of {name} (pid {pid}) over {graph.seconds:g} s; "
          "where the time went (own samples):")
    for line in hottest_lines(graph.root, 25):
        print(line)
    if args.output:
        args.output.write_text("".join(_collapsed(graph.root)), encoding="utf-8")
        print(f"collapsed stacks written to {args.output}")
    return exitcodes.OK


def _pid_of(config: Config, process: str) -> tuple[int, str]:
    if process.isdigit():
        return int(process), process
    from clusterdeck.core.client.jobclient import ClusterClient
    with ClusterClient(config, connect_timeout=5.0) as client:
        overview = client.cluster_overview(timeout=5.0)
        leader = client.leader(timeout=5.0)
    found = {"jobmanager": (leader.pid, leader.host)}
    found.update({tm.id: (tm.pid, tm.host) for tm in overview.taskmanagers})
    if process not in found:
        raise ProfilingError(f"no process {process!r} in cluster {overview.cluster_id} "
                             f"(there are: {', '.join(sorted(found))})")
    pid, host = found[process]
    if host != socket.gethostname():
        raise ProfilingError(f"{process} runs on {host}: run clusterdeck profile there")
    return pid, process


def _collapsed(root: FlameNode) -> list[str]:
    """Back to collapsed stacks: each path with the samples that ended there."""
    lines: list[str] = []
    pending: list[tuple[FlameNode, str]] = [(child, child.name)
                                            for child in root.children.values()]
    while pending:
        node, path = pending.pop()
        own = node.samples - sum(child.samples for child in node.children.values())
        if own > 0:
            lines.append(f"{path} {own}\n")
        pending.extend((child, f"{path};{child.name}") for child in node.children.values())
    return lines
