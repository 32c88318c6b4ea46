"""``clusterdeck reproduce JOB [SUBTASK]``: a folder to run a failed attempt again here,
and ``clusterdeck reproduce --run DIR``: run it (docs/reproduce.md). The folder is
written from the JobManager's job store and work dir on this machine: the cluster need
not run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clusterdeck.core.config.settings import Config
from clusterdeck.core.node import exitcodes
from clusterdeck.core.reproduce.command import add_run_options, run_folder
from clusterdeck.core.reproduce.folder import DEFAULT_MAX_INPUT_BYTES, ReproductionError
from clusterdeck.core.reproduce.stored import RECORDING_LACKS


def add_reproduce_command(commands: argparse._SubParsersAction,
                          common: argparse.ArgumentParser) -> None:
    reproduce = commands.add_parser(
        "reproduce", parents=[common], help="write a folder that runs a failed subtask "
        "again on this machine (--run DIR runs it)")
    reproduce.add_argument("job", nargs="?", metavar="JOB", help="the job id")
    reproduce.add_argument("subtask", nargs="?", metavar="SUBTASK", help="VERTEX or "
                           "VERTEX#INDEX (default: the root cause's)")
    reproduce.add_argument("--attempt", type=int, metavar="N", help="this attempt of the "
                           "subtask (default: its newest failed one)")
    reproduce.add_argument("--out", type=Path, metavar="DIR", help="the folder to write "
                           "(new or empty; default ./reproduce-JOB-VERTEX-INDEX-aN)")
    reproduce.add_argument("--max-input-bytes", type=int, default=DEFAULT_MAX_INPUT_BYTES,
                           metavar="BYTES", help="copy at most this much input and state "
                           f"(default {DEFAULT_MAX_INPUT_BYTES // 2**20} MiB)")
    reproduce.add_argument("--recording", type=Path, metavar="FILE", help="from a flight "
                           "recording (not yet: says what it lacks)")
    reproduce.add_argument("--run", type=Path, metavar="DIR", help="run a folder written "
                           "before, instead of writing one")
    add_run_options(reproduce)


def cmd_reproduce(config: Config, args: argparse.Namespace) -> int:
    if args.run is not None:
        if args.job is not None:
            print("clusterdeck: --run DIR takes no JOB", file=sys.stderr)
            return exitcodes.USAGE
        return run_folder(args.run, args)
    if args.job is None:
        print("clusterdeck: reproduce needs a JOB (or --run DIR)", file=sys.stderr)
        return exitcodes.USAGE
    if args.recording is not None:
        print(f"clusterdeck: {RECORDING_LACKS}", file=sys.stderr)
        return exitcodes.FAILED
    if args.max_input_bytes < 0:
        print("clusterdeck: --max-input-bytes must not be negative", file=sys.stderr)
        return exitcodes.USAGE
    from clusterdeck.core.reproduce.bundle import reproduce_job
    try:
        folder, reproduction = reproduce_job(config, args.job, args.subtask, args.attempt,
                                             args.out, max_input_bytes=args.max_input_bytes)
    except ReproductionError as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return exitcodes.FAILED
    expected = reproduction.expected
    where = f" at {expected.file}:{expected.line}" if expected.line else ""
    print(f"wrote {folder}: {reproduction.vertex_id}#{reproduction.subtask} attempt "
          f"{reproduction.attempt}, which failed with {expected.exception_type}{where}")
    print(f"run it: clusterdeck reproduce --run {folder} [--pdb]   (see {folder}/run.txt)")
    return exitcodes.OK

