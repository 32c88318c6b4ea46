"""``clusterdeck``: the command line. Exit codes are documented in docs/cli.md."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from clusterdeck.broker.connection import NoBrokerError
from clusterdeck.core import __version__
from clusterdeck.core.cli.comparecommands import add_compare_command, cmd_compare
from clusterdeck.core.cli.credentialcommands import (
    add_client_credentials,
    add_credentials_command,
    client_login,
    cmd_credentials,
    jobmanager_broker,
    taskmanager_broker,
    warn_password_in_argv,
)
from clusterdeck.core.cli.jobcommands import (
    add_job_commands,
    cmd_cancel,
    cmd_failures,
    cmd_list,
    cmd_result,
    cmd_run,
    cmd_savepoint,
    cmd_stop,
    cmd_submit,
    split_job_args,
    unrecognized,
)
from clusterdeck.core.cli.profilecommands import add_profile_command, cmd_profile
from clusterdeck.core.cli.recordcommands import add_record_commands, cmd_record, cmd_recorder
from clusterdeck.core.cli.reproducecommands import add_reproduce_command, cmd_reproduce
from clusterdeck.core.cli.rescalecommand import add_rescale_command, cmd_rescale
from clusterdeck.core.cli.statecommands import add_state_command, cmd_state
from clusterdeck.core.client.jobclient import ClusterUnreachableError
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config, ConfigError, load, parse_override
from clusterdeck.core.node import exitcodes
from clusterdeck.core.node.clusterlock import ClusterLockedError
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.rpc import AskTimeoutError, RemoteError
from clusterdeck.core.rpc.mqtt import BrokerUnreachableError

EXIT_OK = exitcodes.OK
EXIT_FAILED = exitcodes.FAILED
EXIT_USAGE = exitcodes.USAGE
EXIT_UNREACHABLE = exitcodes.UNREACHABLE


def _common() -> argparse.ArgumentParser:
    """The options every command takes, before or after the command's name. No copy has a
    default (a subcommand's default would overwrite what was given before the command);
    ``effective_config`` reads them with their defaults."""
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--config", type=Path, help="configuration file (default: the "
                        "clusterdeck.toml in the user's config dir)")
    common.add_argument("-D", dest="overrides", action="append", metavar="KEY=VALUE",
                        help="override one configuration key")
    common.add_argument("--cluster", help="cluster id (same as -D cluster.id=ID)")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(prog="clusterdeck", parents=[common],
                                     description="A desktop cluster manager: a Flink-style "
                                     "runtime over MQTT whose tasks run on PySpark.")
    parser.add_argument("--version", action="version", version=f"clusterdeck {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("up", parents=[common], help="run a local cluster until Ctrl-C")
    up.add_argument("--taskmanagers", type=int, help="TaskManagers to start")
    up.add_argument("--slots", type=int, help="slots per TaskManager")
    up.add_argument("--broker", choices=["auto", "mosquitto", "amqtt", "external"],
                    help="broker kind")
    up.add_argument("--jobmanagers", type=int, help="JobManagers to start: one leads, the "
                    "others stand by (needs --ha)")
    up.add_argument("--ha", choices=["none", "local", "zookeeper"], help="leader election "
                    "(ha.mode; docs/ha.md)")
    up.add_argument("--check", action="store_true", help="start, wait until every "
                    "TaskManager registered, print the status, stop")
    up.add_argument("--provider", choices=["none", "local", "command"], help="who starts "
                    "TaskManagers on demand (elastic.provider; docs/elastic.md); --min- or "
                    "--max-taskmanagers alone mean local")
    up.add_argument("--min-taskmanagers", type=int, help="TaskManagers kept running "
                    "(elastic.min-taskmanagers)")
    up.add_argument("--max-taskmanagers", type=int, help="TaskManagers at most "
                    "(elastic.max-taskmanagers)")
    up.add_argument("--idle-timeout", help="stop a TaskManager started on demand once it "
                    "was idle this long (elastic.idle-timeout, e.g. \"30 s\")")

    status = commands.add_parser("status", parents=[common], help="TaskManagers and slots")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--broker", dest="broker_url", help="mqtt://user:password@host:port")

    broker = commands.add_parser("broker", parents=[common], help="run the cluster's broker")
    broker.add_argument("--cluster-dir", type=Path, help="the cluster's state dir (default: "
                        "from cluster.id)")
    jobmanager = commands.add_parser("jobmanager", parents=[common], help="run a JobManager")
    jobmanager.add_argument("--broker", dest="broker_url", help="mqtt://user:pw@host:port")
    jobmanager.add_argument("--ha", choices=["none", "local", "zookeeper"], help="leader "
                            "election (ha.mode): with local or zookeeper, stand by until "
                            "this JobManager leads")
    jobmanager.add_argument("--credentials", metavar="FILE", help="a file from `clusterdeck "
                            "credentials export --role jobmanager` (- for standard input): "
                            "broker, login and CA of a cluster on another machine")
    taskmanager = commands.add_parser("taskmanager", parents=[common], help="run a TaskManager")
    taskmanager.add_argument("--id", dest="resource_id", help="TaskManager id: its login, "
                             "taskmanager-<n> (default: one not yet handed out; with "
                             "--credentials, the file's)")
    taskmanager.add_argument("--slots", type=int, help="task slots")
    taskmanager.add_argument("--broker", dest="broker_url", help="mqtt://user:pw@host:port "
                             "of a cluster on another machine (the password shows in ps: "
                             "prefer --credentials)")
    taskmanager.add_argument("--credentials", metavar="FILE", help="a file from "
                             "`clusterdeck credentials export` (- for standard input): "
                             "broker, login and CA of a cluster on another machine")
    add_credentials_command(commands, common)
    add_record_commands(commands, common)
    add_profile_command(commands, common)
    add_compare_command(commands, common)
    add_state_command(commands, common)
    add_reproduce_command(commands, common)

    add_job_commands(commands, common)
    add_rescale_command(commands, common)
    add_client_credentials(commands)
    commands.add_parser("gui", help="open the desktop app (gui --help for its options)",
                        add_help=False)

    config_cmd = commands.add_parser("config", parents=[common], help="configuration")
    config_cmd.add_argument("action", choices=["show"], help="show: the effective values")
    return parser


def effective_config(args: argparse.Namespace) -> Config:
    args.config = getattr(args, "config", None)
    overrides = dict(parse_override(item) for item in getattr(args, "overrides", []))
    if getattr(args, "cluster", None):
        overrides["cluster.id"] = args.cluster
    extra = {"taskmanagers": "taskmanager.count", "slots": "taskmanager.slots",
             "jobmanagers": "jobmanager.count", "ha": "ha.mode",
             "provider": "elastic.provider", "min_taskmanagers": "elastic.min-taskmanagers",
             "max_taskmanagers": "elastic.max-taskmanagers",
             "idle_timeout": "elastic.idle-timeout"}
    for attribute, key in extra.items():
        if getattr(args, attribute, None) is not None:
            overrides[key] = getattr(args, attribute)
    if args.command in ("up", "run") and args.broker:
        overrides["broker.kind"] = args.broker
    config = load(args.config, overrides)
    limits_only = "elastic.provider" not in overrides and any(
        key in overrides for key in ("elastic.min-taskmanagers", "elastic.max-taskmanagers"))
    if limits_only and config["elastic.provider"] == "none":
        config = config.with_overrides({"elastic.provider": "local"})
    return config


def main(argv: Sequence[str] | None = None) -> int:
    """Every command but ``gui``, which ``clusterdeck.gui.launcher`` (the installed command)
    handles before it calls this: the runtime never imports the desktop app.

    Expected conditions end as one line and an exit code (docs/cli.md), never as a
    traceback: a closed pipe (``| head``), Ctrl-C, an unreachable cluster, no answer."""
    if argv is None and sys.argv[1:2] == ["taskmanager"]:
        seed_hashes_as_spark_submit()
    try:
        status = _run(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return status
    except BrokenPipeError:
        # Nobody reads stdout any more; point it at /dev/null so the final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exitcodes.CLOSED_PIPE
    except KeyboardInterrupt:
        return EXIT_FAILED


def seed_hashes_as_spark_submit() -> None:
    """spark-submit starts every Python driver with ``PYTHONHASHSEED=0`` (its launch
    script exports it), and Spark ML's estimators take their default seeds from Python's
    ``hash()`` of a class name: a TaskManager is the driver of the scripts it runs, so it
    runs with the same seed, or ``word2vec_example.py`` would print other vectors than
    under spark-submit. A TaskManager started without one starts itself again with it
    (same process id, arguments and standard input; nothing was read yet); a seed the
    user set is kept. Its Spark's Python workers inherit it."""
    if "PYTHONHASHSEED" not in os.environ:
        os.execve(sys.executable, sys.orig_argv, {**os.environ, "PYTHONHASHSEED": "0"})


def _run(arguments: list[str]) -> int:
    if arguments[:1] == ["gui"]:
        print("clusterdeck: the desktop app starts from the installed command "
              "(clusterdeck gui, or python -m clusterdeck.gui)", file=sys.stderr)
        return EXIT_USAGE
    parser = build_parser()
    own, job_args = split_job_args(arguments)
    args, unknown = parser.parse_known_args(own)
    if unknown:
        parser.error(unrecognized(args.command, unknown, arguments))
    args.job_args = job_args
    try:
        config = effective_config(args)
    except ConfigError as error:
        print(f"clusterdeck: configuration error: {error}", file=sys.stderr)
        return EXIT_USAGE
    handler = {"up": cmd_up, "status": cmd_status, "broker": cmd_broker,
               "jobmanager": cmd_jobmanager, "taskmanager": cmd_taskmanager,
               "config": cmd_config, "credentials": cmd_credentials, "submit": cmd_submit,
               "run": cmd_run, "list": cmd_list,
               "cancel": cmd_cancel, "savepoint": cmd_savepoint, "stop": cmd_stop,
               "result": cmd_result,
               "failures": cmd_failures, "recorder": cmd_recorder,
               "record": cmd_record, "profile": cmd_profile,
               "compare": cmd_compare, "state": cmd_state,
               "reproduce": cmd_reproduce, "rescale": cmd_rescale}[args.command]
    try:
        return handler(config, args)
    except ConfigError as error:
        print(f"clusterdeck: configuration error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (NoBrokerError, ClusterUnreachableError, BrokerUnreachableError) as error:
        print(f"clusterdeck: cluster unreachable: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except AskTimeoutError as error:
        print(f"clusterdeck: the cluster did not answer: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except RemoteError as error:
        print(f"clusterdeck: {error.remote_message}", file=sys.stderr)
        return EXIT_FAILED
    except ClusterLockedError as error:  # up, run, jobmanager: the cluster already runs
        print(f"clusterdeck: {error}; stop it first, or choose another cluster id "
              "(--cluster)", file=sys.stderr)
        return exitcodes.LOCKED


def cmd_config(config: Config, args: argparse.Namespace) -> int:
    print(f"# effective configuration (file: {args.config or paths.config_file()})")
    print(config.to_toml(), end="")
    return EXIT_OK


def cmd_broker(config: Config, args: argparse.Namespace) -> int:
    from clusterdeck.broker.server import serve
    return serve(config, getattr(args, "cluster_dir", None)
                 or paths.cluster_dir(config["cluster.id"]))


def cmd_jobmanager(config: Config, args: argparse.Namespace) -> int:
    from clusterdeck.core.jobmanager.main import run_jobmanager
    config, broker = jobmanager_broker(config, args)
    return run_jobmanager(config, broker)


def missing_java(config: Config) -> str | None:
    """What is wrong with Java, when this command's TaskManagers will need Spark."""
    from clusterdeck.core.cli.prereqs import check_java
    return check_java() if config["spark.start"] == "eager" else None


def cmd_taskmanager(config: Config, args: argparse.Namespace) -> int:
    config, broker, resource_id = taskmanager_broker(config, args)
    if problem := missing_java(config):
        print(f"clusterdeck: {problem}", file=sys.stderr)
        return EXIT_FAILED
    from clusterdeck.core.taskmanager.main import run_taskmanager
    return run_taskmanager(config, resource_id, broker)


def cmd_status(config: Config, args: argparse.Namespace) -> int:
    from clusterdeck.core.client.jobclient import ClusterClient
    from clusterdeck.core.rpc import RpcError
    warn_password_in_argv(args.broker_url)
    config, address, role = client_login(config, args)
    try:
        with ClusterClient(config, address or args.broker_url, connect_timeout=5.0,
                           role=role) as client:
            overview = client.cluster_overview(timeout=5.0)
    except (ClusterUnreachableError, NoBrokerError, RpcError, OSError) as error:
        print(f"clusterdeck: cluster unreachable: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.json:
        print(json.dumps(overview_json(overview), indent=2))
    else:
        print_overview(overview)
    return EXIT_OK


def overview_json(overview: p.ClusterOverview) -> dict:
    document = asdict(overview)
    document.pop("fencing_token", None)
    if document.get("elastic"):
        document["elastic"].pop("fencing_token", None)
    document["taskmanagers"] = [
        {**asdict(info), "state": info.state.value} for info in overview.taskmanagers]
    return document


# A clock offset under a second is within what a heartbeat's delay adds to the
# measurement, and harmless: durations and timeouts run on monotonic clocks.
CLOCK_SHOWN_FROM = 1.0


def print_overview(overview: p.ClusterOverview) -> None:
    print(f"cluster {overview.cluster_id}: JobManager pid {overview.jobmanager_pid}"
          f"{f' on {overview.leader_host}' if overview.leader_host else ''}"
          f"{f' leads (epoch {overview.leader_epoch})' if overview.leader_epoch else ''}, "
          f"{overview.slots_free}/{overview.slots_total} slots free")
    if overview.leader_cause:
        print(f"leading since: {overview.leader_cause}")
    for standby in overview.standbys:
        print(f"standby JobManager: {standby}")
    header = f"{'TASKMANAGER':<20} {'STATE':<11} {'HOST':<16} {'PID':>7} {'SLOTS':>5} " \
             f"{'FREE':>4} {'HEARTBEAT':>9}"
    print(header)
    for info in overview.taskmanagers:
        age = "-" if info.heartbeat_age_s is None else f"{info.heartbeat_age_s:.1f} s"
        print(f"{info.id:<20} {info.state.value:<11} {info.host[:16]:<16} {info.pid:>7} "
              f"{info.slots_total:>5} {info.slots_free:>4} {age:>9}")
        if info.lost_cause:
            print(f"{'':<20} {info.lost_cause}")
        if info.clock_offset_s is not None and abs(info.clock_offset_s) >= CLOCK_SHOWN_FROM:
            print(f"{'':<20} clock {info.clock_offset_s:+.0f} s off the JobManager's")
    if overview.elastic is not None:
        print_demand(overview.elastic)


def print_demand(demand: p.TaskManagerDemand) -> None:
    """The active ResourceManager's side of the status (docs/elastic.md)."""
    print(f"elastic: {demand.min_taskmanagers} to {demand.max_taskmanagers} TaskManagers; "
          f"starting on demand: {', '.join(demand.starts) or 'none'}; stopping (idle): "
          f"{', '.join(demand.stops) or 'none'}; failed starts: {demand.failed_starts}")
    if demand.retry_at > time.time():
        print(f"next start not before {time.strftime('%H:%M:%S', time.localtime(demand.retry_at))}"
              " (back-off after a failed start)")
    if demand.last_failure:
        print(f"last failed start: {demand.last_failure}")


def cmd_up(config: Config, args: argparse.Namespace) -> int:
    from clusterdeck.broker.server import BrokerStartError
    from clusterdeck.core.client.localcluster import LocalCluster
    from clusterdeck.core.ha.zkserver import ZooKeeperMissingError
    from clusterdeck.core.node.service import wait_for_termination
    from clusterdeck.core.supervisor import ProcessInfo

    def report(info: ProcessInfo) -> None:
        pid = f" (pid {info.pid})" if info.pid else ""
        print(f"[{time.strftime('%H:%M:%S')}] {info.name}: {info.status.value}{pid}",
              file=sys.stderr)

    if problem := missing_java(config):
        print(f"clusterdeck: {problem}", file=sys.stderr)
        return EXIT_FAILED
    try:
        cluster = LocalCluster(config)
    except BrokerStartError as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return EXIT_USAGE
    cluster.supervisor.add_listener(report)
    try:
        cluster.start()
        overview = cluster.wait_for_taskmanagers(cluster.initial_taskmanagers, timeout=60.0)
        print_overview(overview)
        print(f"logs: {paths.cluster_log_dir(cluster.cluster_id)}", file=sys.stderr)
        if args.check:
            return EXIT_OK
        print("cluster running; Ctrl-C stops it", file=sys.stderr)
        wait_for_termination()
        return EXIT_OK
    except (TimeoutError, ZooKeeperMissingError) as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        cluster.stop()
