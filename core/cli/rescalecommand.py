"""``clusterdeck rescale JOB N FILE [-- ARGS]``: a running streaming job moved to
parallelism N in one step (core/client/rescale.py), its progress on standard error and
the new job's id on standard output."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from clusterdeck.core.cli.jobcommands import connected
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node import exitcodes


def add_rescale_command(commands: Any, common: argparse.ArgumentParser) -> None:
    rescale = commands.add_parser(
        "rescale", parents=[common], help="stop a streaming job with a savepoint and resume "
        "it from there at another parallelism; prints the new job's id")
    rescale.add_argument("job_id")
    rescale.add_argument("parallelism", type=int, help="the job's new default parallelism "
                         "(as submit -p)")
    rescale.add_argument("file", type=Path, help="the job's file, submitted again (its "
                         "arguments follow a --)")
    rescale.add_argument("--timeout", type=float, default=660.0, metavar="SECONDS",
                         help="give up waiting for a step after this long (default 660)")


def cmd_rescale(config: Config, args: argparse.Namespace) -> int:
    from clusterdeck.core.client.rescale import RescaleFailed, rescale
    from clusterdeck.core.jobapi.errors import JobLoadError
    from clusterdeck.core.rpc import AskTimeoutError, RemoteError
    if args.parallelism < 1:
        print("clusterdeck: rescale needs a parallelism of at least 1", file=sys.stderr)
        return exitcodes.REJECTED
    with connected(config, args, 5.0) as client:
        try:
            done = rescale(client, args.job_id, args.parallelism, args.file,
                           list(getattr(args, "job_args", [])), timeout=args.timeout,
                           report=lambda line: print(line, file=sys.stderr, flush=True))
        except (RemoteError, RescaleFailed, JobLoadError) as error:
            print(f"clusterdeck: rescale failed: {error}", file=sys.stderr)
            return exitcodes.FAILED
        except AskTimeoutError:
            print(f"clusterdeck: no answer within {args.timeout:g} s", file=sys.stderr)
            return exitcodes.UNREACHABLE
    print(done.job_id)
    return exitcodes.OK
