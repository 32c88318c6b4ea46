"""``clusterdeck compare RUN RUN``: two runs of a job side by side, from the cluster or
from recordings (docs/comparing.md)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clusterdeck.core.client.comparison import RunSummary, compare, format_rows
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node import exitcodes
from clusterdeck.core.recorder.replay import recorded_runs


class RunNotFound(Exception):
    pass


def add_compare_command(commands: argparse._SubParsersAction,
                        common: argparse.ArgumentParser) -> None:
    compare_cmd = commands.add_parser("compare", parents=[common], help="two runs of a job "
                                      "side by side: time per vertex, records, failures")
    for which in ("first", "second"):
        compare_cmd.add_argument(which, metavar="RUN", help="a job id of the cluster, a "
                                 "recording (FILE, when it holds one job) or FILE:JOB")
    compare_cmd.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_compare(config: Config, args: argparse.Namespace) -> int:
    try:
        first, second = (_run(config, which) for which in (args.first, args.second))
    except RunNotFound as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return exitcodes.FAILED
    rows = compare(first, second)
    if args.json:
        print(json.dumps([asdict(row) for row in rows], indent=2))
    else:
        print(format_rows(rows))
    if first.partial or second.partial:
        print("(a snapshot left out subtasks: vertex times are of the subtasks it kept)",
              file=sys.stderr)
    return exitcodes.OK


def _run(config: Config, which: str) -> RunSummary:
    path, _, job = which.partition(":")
    if Path(path).is_file():
        return _recorded(Path(path), job)
    from clusterdeck.core.client.jobclient import JobClient
    with JobClient(config, connect_timeout=5.0) as client:
        snapshot = client.snapshot(which)
        if snapshot is None:
            raise RunNotFound(f"job {which} is not in the cluster (nor a recording file)")
        return RunSummary.of(snapshot.graph, _result(client, which))


def _result(client: Any, job_id: str) -> Any:
    result = client.result(job_id)
    return result if result.status.is_terminal else None


def _recorded(path: Path, job: str) -> RunSummary:
    try:
        runs = recorded_runs(path)
    except Exception as error:  # not SQLite, not a recording: said in one line
        raise RunNotFound(f"{path} is not a readable recording: {error}") from None
    if not job and len(runs) != 1:
        raise RunNotFound(f"{path} holds {len(runs)} jobs: name one as {path}:JOB "
                          f"({', '.join(sorted(runs)) or 'none'})")
    found = runs.get(job) if job else next(iter(runs.values()))
    if found is None:
        raise RunNotFound(f"job {job} is not in {path}")
    return RunSummary.of(*found)
