"""The run of a reproduction folder as a command: ``python -m clusterdeck.core.reproduce``
and ``clusterdeck reproduce --run`` both end here.

Exit codes: 1 when the subtask failed (what a reproduction is for; the lines before say
whether it is the cluster's failure), 0 when it did not fail, 2 when the folder cannot
be run (what is wrong is said on standard error).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from clusterdeck.core.node import exitcodes
from clusterdeck.core.reproduce.folder import ReproductionError

DEFAULT_TIMEOUT = 300.0


def add_run_options(parser: argparse.ArgumentParser) -> None:
    debugger = parser.add_mutually_exclusive_group()
    debugger.add_argument("--pdb", action="store_true", help="stop in pdb at the failing "
                          "frame (post-mortem)")
    debugger.add_argument("--debugpy", type=int, metavar="PORT", help="wait for an editor "
                          "to attach to debugpy on 127.0.0.1:PORT first")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help="give a streaming subtask this long to fail (default 300)")


def run_folder(folder: Path, args: argparse.Namespace) -> int:
    """Run ``folder`` with the options of ``add_run_options``."""
    from clusterdeck.core.reproduce.runner import run_reproduction
    if args.debugpy is not None and not 0 < args.debugpy < 65536:
        print(f"clusterdeck: --debugpy takes a port, not {args.debugpy}", file=sys.stderr)
        return exitcodes.USAGE
    try:
        return run_reproduction(folder, post_mortem=args.pdb, debugpy_port=args.debugpy,
                                timeout=args.timeout)
    except ReproductionError as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return exitcodes.USAGE


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusterdeck.core.reproduce",
                                     description="Run a failed subtask again from the "
                                     "folder `clusterdeck reproduce JOB` wrote.")
    parser.add_argument("folder", type=Path, metavar="DIR")
    add_run_options(parser)
    args = parser.parse_args(argv)
    return run_folder(args.folder, args)
