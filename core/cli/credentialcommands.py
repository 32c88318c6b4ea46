"""``clusterdeck credentials export`` and the ways a process is given a login on the command
line: a credentials file (``--credentials``), or the older ``--broker`` URL with the
password in it, which still works but is announced as readable by every local user."""

from __future__ import annotations

import argparse
import socket
import sys

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.credentials import ROLES
from clusterdeck.broker.exported import (
    STDIO,
    ExportedCredentials,
    ExportedCredentialsError,
    export,
    read,
    readable_by_others,
    write,
)
from clusterdeck.broker.server import listen_host
from clusterdeck.broker.tls import is_loopback
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config, ConfigError, load
from clusterdeck.core.node import exitcodes
from clusterdeck.core.node.service import run_dir


def add_credentials_command(commands: argparse._SubParsersAction,
                            common: argparse.ArgumentParser) -> None:
    credentials = commands.add_parser("credentials", parents=[common],
                                      help="logins for processes on other machines")
    actions = credentials.add_subparsers(dest="credentials_action", required=True)
    exporting = actions.add_parser("export", parents=[common], help="write one role's "
                                   "login, the broker's URL and its CA to a file")
    exporting.add_argument("--role", choices=ROLES, default="taskmanager",
                           help="whose login (default: taskmanager)")
    exporting.add_argument("--host", help="name or address the other machine reaches "
                           "this one by (default: this machine's host name)")
    exporting.add_argument("-o", "--output", help="file to write, mode 0600; - for "
                           "standard output (default: <cluster>-<role>.credentials.json)")


def cmd_credentials(config: Config, args: argparse.Namespace) -> int:
    cluster_id = config["cluster.id"]
    host = args.host or socket.gethostname()
    try:
        exported = export(paths.cluster_dir(cluster_id), cluster_id, args.role, host)
    except ExportedCredentialsError as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return exitcodes.USAGE
    running = _running_config(cluster_id) or config
    if is_loopback(listen_host(running)):
        print(f"clusterdeck: warning: the broker listens on {listen_host(running)} only; "
              "set broker.bind (e.g. 0.0.0.0) and restart the cluster so other machines "
              "can reach it", file=sys.stderr)
    if not exported.address.tls:
        print("clusterdeck: warning: broker.tls is off: this login and the cluster's "
              "traffic would cross the network in clear", file=sys.stderr)
    output = args.output or f"{cluster_id}-{args.role}.credentials.json"
    write(exported, output)
    if output != STDIO:
        print(f"clusterdeck: wrote the {args.role} login of cluster {cluster_id!r} for "
              f"{exported.address.url()} to {output} (mode 0600; it holds a password)",
              file=sys.stderr)
    return exitcodes.OK


def _running_config(cluster_id: str) -> Config | None:
    """The settings the cluster's processes were started with (``up`` writes them to its
    run folder): the bind address is theirs, not this command's defaults."""
    path = run_dir(cluster_id) / "config.toml"
    try:
        return load(path) if path.is_file() else None
    except ConfigError:
        return None


def taskmanager_broker(config: Config, args: argparse.Namespace
                       ) -> tuple[Config, str | BrokerAddress | None, str | None]:
    """The configuration, broker and TaskManager id a ``taskmanager`` command runs with.

    ``--credentials`` sets the cluster id from its file (a machine that only runs a
    TaskManager has no configuration of its own) and the TaskManager id from its login;
    a different ``cluster.id`` or ``--id`` given here is a mistake and raises
    ConfigError.
    """
    config, broker, exported = _node_login(
        config, args, "taskmanager",
        "a TaskManager needs one of its own (clusterdeck credentials export --role "
        "taskmanager)")
    if exported is None:
        return config, broker, args.resource_id
    if args.resource_id and args.resource_id != exported.identity:
        raise ConfigError(f"--credentials {args.credentials} is the login of TaskManager "
                          f"{exported.identity!r}; leave out --id {args.resource_id}")
    return config, broker, exported.identity


def jobmanager_broker(config: Config, args: argparse.Namespace
                      ) -> tuple[Config, str | BrokerAddress | None]:
    """The configuration and broker a ``jobmanager`` command runs with: ``--credentials``
    (``credentials export --role jobmanager``) sets the cluster id and carries the login
    and the broker's CA, which a ``--broker`` URL cannot: a standby JobManager on another
    machine (docs/ha.md)."""
    config, broker, _ = _node_login(
        config, args, "jobmanager",
        "a JobManager needs the cluster's JobManager login (clusterdeck credentials export "
        "--role jobmanager)")
    return config, broker


def _node_login(config: Config, args: argparse.Namespace, role: str, hint: str
                ) -> tuple[Config, str | BrokerAddress | None, ExportedCredentials | None]:
    """What a cluster process of ``role`` connects with: its ``--broker`` URL as given
    (no credentials file), or the cluster id and address of its ``--credentials`` file,
    which must hold a ``role`` login (``hint`` says where to get one)."""
    source = getattr(args, "credentials", None)
    if source is None:
        warn_password_in_argv(args.broker_url)
        return config, args.broker_url, None
    if args.broker_url:
        raise ConfigError("give either --credentials or --broker, not both")
    exported = _credentials_for(config, source)
    if exported.role != role:
        raise ConfigError(f"--credentials {source} holds the {exported.role} login; {hint}")
    return (config.with_overrides({"cluster.id": exported.cluster_id}), exported.address,
            exported)


# The commands that connect to a cluster as a client, and those of them an observer login,
# which reads everything and asks nothing (broker/acl.py), can answer from what the
# JobManager keeps retained on the broker.
CLIENT_COMMANDS = ("submit", "status", "list", "cancel", "result", "failures", "savepoint",
                   "stop", "rescale")
WATCHING_COMMANDS = ("status", "list")


def add_client_credentials(commands: argparse._SubParsersAction) -> None:
    """``--credentials FILE`` on every command of CLIENT_COMMANDS: one place, one text."""
    for name in CLIENT_COMMANDS:
        commands.choices[name].add_argument(
            "--credentials", metavar="FILE", help="a file from `clusterdeck credentials "
            "export --role client` (or observer: status and list only; - for standard "
            "input): the broker, login and CA of a cluster on another machine")


def client_login(config: Config, args: argparse.Namespace
                 ) -> tuple[Config, BrokerAddress | None, str]:
    """The configuration, broker address and role a client command connects with: the
    local cluster's client login (address None) unless ``--credentials`` names a file,
    whose cluster id, address and login are used instead. A login that may not do what
    the command asks raises ConfigError here, before anything waits on the broker."""
    source = getattr(args, "credentials", None)
    if source is None:
        return config, None, "client"
    if getattr(args, "broker_url", None):
        raise ConfigError("give either --credentials or --broker, not both")
    exported = _credentials_for(config, source)
    if exported.role not in ("client", "observer") or (
            exported.role == "observer" and args.command not in WATCHING_COMMANDS):
        may = "only watch (" + ", ".join(WATCHING_COMMANDS) + ")" \
            if exported.role == "observer" else "not use the job commands"
        raise ConfigError(f"--credentials {source} holds the {exported.role} login, which "
                          f"may {may}; `{args.command}` needs a client login (clusterdeck "
                          "credentials export --role client)")
    return (config.with_overrides({"cluster.id": exported.cluster_id}), exported.address,
            exported.role)


def _credentials_for(config: Config, source: str) -> ExportedCredentials:
    """The file's credentials, or ConfigError when it is none or of another cluster than
    one given with --cluster; warns when other users may read its password."""
    try:
        exported = read(source)
    except ExportedCredentialsError as error:
        raise ConfigError(f"--credentials {source}: {error}") from None
    if readable_by_others(source):
        print(f"clusterdeck: warning: {source} can be read by other users of this "
              f"machine; chmod 600 {source}", file=sys.stderr)
    if "cluster.id" in config.changed() and config["cluster.id"] != exported.cluster_id:
        raise ConfigError(f"--credentials {source} is for cluster {exported.cluster_id!r}, "
                          f"not {config['cluster.id']!r}")
    return exported


def warn_password_in_argv(broker_url: str | None) -> None:
    """Say so when a ``--broker`` URL carries a password: it is in this process's command
    line, which every user of the machine can read (``ps``, /proc/<pid>/cmdline)."""
    if not broker_url:
        return
    try:
        has_password = BrokerAddress.parse(broker_url).password is not None
    except ValueError:
        return  # reported where the URL is used
    if has_password:
        print("clusterdeck: warning: the password in --broker is visible to every user of "
              "this machine (ps, /proc/<pid>/cmdline); use --credentials FILE from "
              "`clusterdeck credentials export` instead", file=sys.stderr)
