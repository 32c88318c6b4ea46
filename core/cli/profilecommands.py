"""``clusterdeck profile PROCESS``: a thread dump or a flame graph of one of the cluster's
processes on this machine, with py-spy; ``clusterdeck profile --job JOB --vertex V``: the
flame graph of the workers running one vertex's subtasks; ``--compare``: what changed
from a saved flame graph (docs/profiling.md, docs/comparing.md)."""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from clusterdeck.core.config.settings import Config
from clusterdeck.core.node import exitcodes
from clusterdeck.core.profiling.flamediff import (
    change_lines,
    compare_flame_graphs,
    load_flame_graph,
    save_flame_graph,
)
from clusterdeck.core.profiling.pyspy import (
    FlameNode,
    ProfilingError,
    flame_graph,
    hottest_lines,
    thread_dump,
    thread_lines,
    with_workers,
)
from clusterdeck.core.profiling.vertexprofile import (
    VertexWorker,
    on_this_machine,
    vertex_flame_graph,
    vertex_workers,
)

HEARING_SECONDS = 2.5  # TaskManagers send their live numbers once a second


def add_profile_command(commands: argparse._SubParsersAction,
                        common: argparse.ArgumentParser) -> None:
    profile = commands.add_parser("profile", parents=[common], help="a thread dump or a "
                                  "flame graph of a process of the cluster (py-spy)")
    profile.add_argument("process", metavar="PROCESS", nargs="?", help="jobmanager, "
                         "taskmanager-<n> or a pid (of this machine)")
    profile.add_argument("--job", metavar="JOB", help="with --vertex: the job")
    profile.add_argument("--vertex", metavar="V", help="the flame graph of the workers "
                         "running this vertex's subtasks now (its id or name, or one of its "
                         "operators' names)")
    profile.add_argument("--threads", action="store_true", help="a thread dump, not a "
                         "flame graph")
    profile.add_argument("--seconds", type=float, default=5.0, help="how long to sample "
                         "(default 5, at most 60)")
    profile.add_argument("--rate", type=int, default=100, help="samples a second")
    profile.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the "
                         "collapsed stacks there too (flamegraph.pl, speedscope, --compare)")
    profile.add_argument("--compare", type=Path, nargs="+", metavar="FILE", help="what "
                         "changed from this saved flame graph to the one taken now; with "
                         "two files, from the first to the second (nothing is sampled)")


def cmd_profile(config: Config, args: argparse.Namespace) -> int:
    try:
        if args.compare and len(args.compare) == 2:
            if args.process or args.job or args.vertex or args.threads:
                raise ProfilingError("--compare BEFORE AFTER compares two saved graphs "
                                     "and samples nothing: no PROCESS, --job or --vertex")
            return _compared(*(load_flame_graph(path) for path in args.compare))
        if args.compare and len(args.compare) > 2:
            raise ProfilingError("--compare takes one saved flame graph, or two")
        if args.vertex or args.job:
            return _vertex_profile(config, args)
        if not args.process:
            raise ProfilingError("name a PROCESS, or a vertex with --job JOB --vertex V")
        return _process_profile(config, args)
    except ProfilingError as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return exitcodes.FAILED


def _process_profile(config: Config, args: argparse.Namespace) -> int:
    pid, name = _pid_of(config, args.process)
    workers = with_workers(name)
    if args.threads:
        for thread in thread_dump(pid, subprocesses=workers):
            print("\n".join(thread_lines(thread)))
        return exitcodes.OK
    print(f"sampling {name} (pid {pid}) for {args.seconds:g} s\u2026", file=sys.stderr)
    graph = flame_graph(pid, args.seconds, args.rate, subprocesses=workers)
    print(f"{graph.root.samples:,} samples of {name} (pid {pid}) over {graph.seconds:g} s; "
          "where the time went (own samples):")
    return _printed(graph.root, args)


def _vertex_profile(config: Config, args: argparse.Namespace) -> int:
    if not (args.job and args.vertex) or args.process or args.threads:
        raise ProfilingError("--job JOB --vertex V go together, without PROCESS or "
                             "--threads")
    name, workers, away = _workers_of_vertex(config, args.job, args.vertex)
    for note in away:
        print(f"clusterdeck: {note}", file=sys.stderr)
    print(f"sampling {len(workers)} workers of {name} for {args.seconds:g} s\u2026",
          file=sys.stderr)
    graph = vertex_flame_graph(name, workers, args.seconds, args.rate)
    for note in graph.missed:
        print(f"clusterdeck: not sampled: {note}", file=sys.stderr)
    print(f"{graph.root.samples:,} samples of {name} over {graph.seconds:g} s in "
          f"{', '.join(worker.label for worker in graph.sampled)}; where the time went "
          "(own samples):")
    return _printed(graph.root, args)


def _printed(root: FlameNode, args: argparse.Namespace) -> int:
    for line in hottest_lines(root, 25):
        print(line)
    if args.output:
        written = save_flame_graph(root, args.output)
        print(f"{written:,} collapsed stacks written to {args.output}")
    if args.compare:
        print()
        return _compared(load_flame_graph(args.compare[0]), root)
    return exitcodes.OK


def _compared(before: FlameNode, after: FlameNode) -> int:
    print(f"before: {before.samples:,} samples, after: {after.samples:,} samples; the "
          "frames whose share of the samples changed most:")
    for line in change_lines(compare_flame_graphs(before, after, 40)):
        print(line)
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


def _workers_of_vertex(config: Config, job_id: str, vertex: str
                       ) -> tuple[str, list[VertexWorker], list[str]]:
    """The vertex's name, the workers of its running subtasks on this machine (from the
    TaskManagers' live numbers), and a sentence for each TaskManager elsewhere."""
    from clusterdeck.core.client.jobclient import JobClient
    with JobClient(config, connect_timeout=5.0) as client:
        snapshot = client.snapshot(job_id, timeout=5.0)
        if snapshot is None:
            raise ProfilingError(f"no job {job_id!r} in cluster {config['cluster.id']!r}")
        vertices = snapshot.graph.vertices
        found = [v for v in vertices if vertex in (v.id, v.name)] or [
            v for v in vertices if vertex in {op.name for op in v.operators}]
        if not found:
            raise ProfilingError(f"job {job_id} has no vertex or operator {vertex!r} (its "
                                 f"vertices: {'; '.join(v.name for v in vertices)})")
        overview = client.cluster_overview(timeout=5.0)
        heard = client.live_metrics(HEARING_SECONDS)
    hosts = {**snapshot.graph.hosts, **{tm.id: tm.host for tm in overview.taskmanagers}}
    workers = vertex_workers(((m.taskmanager_id, attempt) for m in heard
                              for attempt in m.attempts), job_id, found[0].id)
    if not workers:
        raise ProfilingError(f"no subtask of {found[0].name} of job {job_id} reported "
                             f"running within {HEARING_SECONDS:g} s")
    local, away = on_this_machine(workers, hosts, socket.gethostname())
    return found[0].name, local, away
