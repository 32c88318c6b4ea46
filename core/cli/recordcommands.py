"""``clusterdeck recorder`` (the process the local cluster supervises) and ``clusterdeck
record export|show|logs``: the cluster's flight recording, handed over as one file and read
without a cluster (docs/recorder.md)."""

from __future__ import annotations

import argparse
import datetime
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node import exitcodes
from clusterdeck.core.recorder.export import RecordingError, RecordingSummary, describe, export
from clusterdeck.core.recorder.logsearch import LEVELS, log_row, search
from clusterdeck.core.recorder.store import FILE_NAME, connect


def add_record_commands(commands: argparse._SubParsersAction,
                        common: argparse.ArgumentParser) -> None:
    commands.add_parser("recorder", parents=[common], help="run the cluster's flight "
                        "recorder (the local cluster starts it)")
    record = commands.add_parser("record", parents=[common],
                                 help="the cluster's flight recording")
    actions = record.add_subparsers(dest="record_action", required=True)
    exporting = actions.add_parser("export", parents=[common], help="write the recording "
                                   "(of some jobs, or all) to one file")
    exporting.add_argument("jobs", nargs="*", metavar="JOB", help="job ids (default: all)")
    exporting.add_argument("--all", action="store_true", help="every job (the default)")
    exporting.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                           help="the file to write; must not exist")
    showing = actions.add_parser("show", parents=[common], help="what a recording holds, "
                                 "read offline")
    showing.add_argument("file", type=Path, nargs="?", metavar="FILE",
                         help="an exported recording (default: the cluster's own)")
    logs = actions.add_parser("logs", parents=[common], help="every process's log lines "
                              "in one, filtered")
    logs.add_argument("file", type=Path, nargs="?", metavar="FILE",
                      help="an exported recording (default: the cluster's own)")
    logs.add_argument("--process", action="append", default=[], metavar="NAME",
                      help="only this process (jobmanager, taskmanager-1, ...); repeatable")
    logs.add_argument("--grep", default="", metavar="TEXT", help="lines containing TEXT "
                      "(case-insensitive): a job id, an attempt, an exception")
    logs.add_argument("--level", choices=LEVELS, help="lines at this level or above")
    logs.add_argument("--limit", type=int, default=1000, help="at most this many lines "
                      "(1000)")


def cmd_recorder(config: Config, args: argparse.Namespace) -> int:
    from clusterdeck.core.recorder.main import run_recorder
    return run_recorder(config)


def cmd_record(config: Config, args: argparse.Namespace) -> int:
    own = paths.cluster_dir(config["cluster.id"]) / FILE_NAME
    if args.record_action == "logs":
        return print_logs(args.file or own, args)
    try:
        if args.record_action == "export":
            if args.all and args.jobs:
                print("clusterdeck: give job ids or --all, not both", file=sys.stderr)
                return exitcodes.USAGE
            summary = export(own, args.output, args.jobs)
            print(f"wrote {args.output}")
        else:
            summary = describe(args.file or own)
    except (RecordingError, OSError) as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return exitcodes.FAILED
    print_summary(summary)
    return exitcodes.OK


def print_logs(path: Path, args: argparse.Namespace) -> int:
    try:
        with closing(connect(path, readonly=True)) as db:
            lines = search(db, processes=args.process, text=args.grep, level=args.level,
                           limit=max(1, args.limit))
    except (OSError, sqlite3.DatabaseError) as error:
        print(f"clusterdeck: {path} is not a recording: {error}", file=sys.stderr)
        return exitcodes.FAILED
    width = max((len(x.process) for x in lines), default=0)
    for line in lines:
        print(log_row(line, width))
    return exitcodes.OK


def print_summary(summary: RecordingSummary) -> None:
    print(f"cluster {summary.cluster}: {summary.messages} messages, {summary.log_lines} "
          f"log lines, {_when(summary.first)} to {_when(summary.last)}")
    for job in summary.jobs:
        cause = f"  {job.root_cause}" if job.root_cause else ""
        print(f"{job.job_id}  {job.status:<9} {job.name}{cause}")
    for peak in summary.processes:
        print(f"{peak.process}: at most {peak.cpu_percent:.0f}% CPU, "
              f"{peak.rss / 2**20:.0f} MiB ({peak.samples} samples)")


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.datetime.fromtimestamp(at).isoformat(sep=" ", timespec="seconds")
