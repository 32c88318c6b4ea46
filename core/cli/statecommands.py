"""``clusterdeck state JOB``: a streaming job's keyed state as a checkpoint or a savepoint
holds it, read from the cluster's checkpoint storage on this machine (docs/state-inspector.md).
Read only; the job may be running, finished or gone. The reading is in ``statereading``."""

from __future__ import annotations

import argparse

from clusterdeck.core.config.settings import Config

ACTIONS = ("vertices", "keys", "top", "growth", "diff", "checkpoints")


def add_state_command(commands: argparse._SubParsersAction,
                      common: argparse.ArgumentParser) -> None:
    state = commands.add_parser("state", parents=[common], help="a streaming job's keyed "
                                "state in a checkpoint or savepoint (read only)")
    state.add_argument("job", metavar="JOB", help="job id (or its unique beginning)")
    state.add_argument("action", nargs="?", default="vertices", choices=ACTIONS,
                       help="vertices (default): keys and bytes per subtask; keys VERTEX; "
                       "top VERTEX; growth: per retained checkpoint; diff A B: checkpoint "
                       "ids or savepoint folders; checkpoints: the retained ones' ids")
    state.add_argument("operands", nargs="*", metavar="ARG", help="VERTEX, or A B for diff")
    where = state.add_mutually_exclusive_group()
    where.add_argument("--checkpoint", type=int, metavar="N", help="this completed "
                       "checkpoint (default: the latest)")
    where.add_argument("--savepoint", metavar="DIR", help="this savepoint folder (a path, "
                       "or its name in the cluster's savepoint folder)")
    state.add_argument("--offset", type=int, default=0, help="first key of the page")
    state.add_argument("--limit", type=int, default=50, help="keys a page holds (top: how "
                       "many)")
    state.add_argument("--search", default="", help="keys whose text contains this")
    state.add_argument("--prefix", default="", help="keys whose text starts with this")
    state.add_argument("--vertex", default="", help="diff: only this vertex")
    state.add_argument("--json", action="store_true", help="print JSON")


def cmd_state(config: Config, args: argparse.Namespace) -> int:
    # Imported here, not at the top: the state's codec (core/engine/records) imports
    # pyspark, which every other command, the JobManager among them, must start without.
    from clusterdeck.core.cli.statereading import read_state
    return read_state(config, args)
