"""The job commands of the CLI: submit, run, list, cancel, result; and how they print."""

from __future__ import annotations

import argparse
import codecs
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from clusterdeck.core.cli.sparkprogress import running_stages, stage_line
from clusterdeck.core.config.settings import Config, ConfigError, parse_override
from clusterdeck.core.node import exitcodes
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.checkpoints import SavepointRestore
from clusterdeck.core.protocol.states import JobStatus

if TYPE_CHECKING:
    from clusterdeck.core.client.jobclient import FileReader, JobClient

EXIT_OK, EXIT_FAILED, EXIT_CANCELED = exitcodes.OK, exitcodes.FAILED, exitcodes.CANCELED
EXIT_REJECTED, EXIT_UNREACHABLE = exitcodes.REJECTED, exitcodes.UNREACHABLE
STATUS_EXIT = {JobStatus.FINISHED: EXIT_OK, JobStatus.FAILED: EXIT_FAILED,
               JobStatus.CANCELED: EXIT_CANCELED}
ROWS_SHOWN = 1000


def add_job_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    for name, text in (("submit", "submit a job file to a running cluster"),
                       ("run", "start a local cluster, run a job file on it, stop it")):
        command = commands.add_parser(name, parents=[common], help=text)
        command.add_argument("file", type=Path, help="a job file (build(env)) or a PySpark "
                             "script; its own arguments follow a --")
        command.add_argument("--parallelism", "-p", type=int, help="default parallelism")
        command.add_argument("--restart-strategy", choices=["none", "fixed-delay",
                                                            "failure-rate", "exponential-delay"],
                             help="this job's restart strategy (default: the cluster's)")
        command.add_argument("-R", dest="restart_options", action="append", default=[],
                             metavar="KEY=VALUE", help="a restart-strategy.* setting for this "
                             "job, e.g. -R restart-strategy.fixed-delay.attempts=5")
        command.add_argument("--task-timeout", type=float, default=0.0, metavar="SECONDS",
                             help="fail a task that runs longer (then restart it)")
        command.add_argument("--conf", dest="spark_conf", action="append", default=[],
                             metavar="KEY=VALUE", help="a Spark setting of a PySpark "
                             "script's session, e.g. --conf spark.sql.shuffle.partitions=8 "
                             "(runtime SQL settings only); repeatable")
        if name == "submit":
            command.add_argument("--detached", "-d", action="store_true",
                                 help="print the job id and return at once")
            command.add_argument("--from-savepoint", "-s", metavar="PATH",
                                 help="start a streaming job from this savepoint (a folder "
                                 "`clusterdeck savepoint` or `stop --savepoint` printed)")
            command.add_argument("--allow-non-restored-state", action="store_true",
                                 help="with --from-savepoint: skip state of vertices this "
                                 "job does not have instead of refusing the job")
        else:
            command.add_argument("--taskmanagers", type=int, help="TaskManagers to start")
            command.add_argument("--slots", type=int, help="slots per TaskManager")
            command.add_argument("--broker", choices=["auto", "mosquitto", "amqtt"])
    listing = commands.add_parser("list", parents=[common], help="the cluster's jobs")
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--limit", "-n", type=int, default=0, metavar="N",
                         help="only the newest N jobs (default: all of them)")
    cancel = commands.add_parser("cancel", parents=[common], help="cancel a job")
    cancel.add_argument("job_id")
    savepoint = commands.add_parser("savepoint", parents=[common], help="take a savepoint "
                                    "of a running streaming job; prints its folder")
    savepoint.add_argument("job_id")
    stop = commands.add_parser("stop", parents=[common], help="stop a streaming job at a "
                               "last checkpoint: its output committed, the job FINISHED")
    stop.add_argument("job_id")
    stop.add_argument("--savepoint", action="store_true", help="and keep that checkpoint "
                      "as a savepoint (printed), to resubmit with --from-savepoint")
    for command in (savepoint, stop):
        command.add_argument("--timeout", type=float, default=660.0, metavar="SECONDS",
                             help="give up waiting after this long (default 660)")
    result = commands.add_parser("result", parents=[common], help="a job's result")
    result.add_argument("job_id")
    shown = result.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true")
    shown.add_argument("--stdout", action="store_true", help="only all of what the job "
                       "printed on standard output, as spark-submit shows it")
    shown.add_argument("--stderr", action="store_true", help="only all of what it printed "
                       "on standard error")
    failures = commands.add_parser("failures", parents=[common],
                                   help="a job's root cause and failure history")
    failures.add_argument("job_id")
    failures.add_argument("--json", action="store_true")


def split_job_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """Everything after the first ``--`` belongs to the job, not to clusterdeck."""
    if "--" not in argv:
        return argv, []
    index = argv.index("--")
    return argv[:index], argv[index + 1:]


def unrecognized(command: str, unknown: list[str], argv: list[str]) -> str:
    """argparse's complaint, and for a job's command the way to pass its arguments:
    spark-submit takes everything after the script as the script's, clusterdeck takes
    them after a ``--`` (so that its own options may follow the file)."""
    complaint = f"unrecognized arguments: {' '.join(unknown)}"
    if command not in ("submit", "run", "rescale") or "--" in argv:
        return complaint
    rest = [a for a in argv if a not in unknown]
    return (f"{complaint} (a job's own arguments follow a --: clusterdeck "
            f"{' '.join([*rest, '--', *unknown])})")


def _job_args(args: argparse.Namespace) -> list[str]:
    return list(getattr(args, "job_args", []))


def connected(config: Config, args: argparse.Namespace, connect_timeout: float) -> JobClient:
    """A client of the local cluster, or of the one whose ``--credentials`` file is given
    (credentialcommands.client_login)."""
    from clusterdeck.core.cli.credentialcommands import client_login
    from clusterdeck.core.client.jobclient import JobClient
    config, address, role = client_login(config, args)
    return JobClient(config, address, connect_timeout, role=role)


def cmd_submit(config: Config, args: argparse.Namespace) -> int:
    options = job_options(args)
    with connected(config, args, 10.0) as client:
        return submit_and_follow(client, args.file, _job_args(args), args.parallelism,
                                 detached=args.detached, **options)


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    """Flink's local execution: a whole cluster just for this one job."""
    from clusterdeck.core.client.jobclient import JobClient
    from clusterdeck.core.client.localcluster import LocalCluster
    if not args.file.is_file():
        print(f"clusterdeck: no such job file: {args.file}", file=sys.stderr)
        return EXIT_REJECTED
    options = job_options(args)  # a bad -R is reported before a cluster is started
    from clusterdeck.core.cli.prereqs import check_java
    if problem := check_java():
        print(f"clusterdeck: {problem}", file=sys.stderr)
        return EXIT_FAILED
    if config["taskmanager.count"] == 0:
        print("clusterdeck: run starts a cluster of its own for the job: it needs at least "
              "one TaskManager (taskmanager.count)", file=sys.stderr)
        return EXIT_FAILED
    cluster = LocalCluster(config)
    try:
        print(f"starting a local cluster ({config['taskmanager.count']} TaskManagers x "
              f"{config['taskmanager.slots']} slots, broker {cluster.broker_kind})",
              file=sys.stderr)
        cluster.start()
        cluster.wait_for_taskmanagers(config["taskmanager.count"], timeout=120.0)
        with JobClient(cluster.config, connect_timeout=30.0) as client:
            return submit_and_follow(client, args.file, _job_args(args), args.parallelism,
                                     **options)
    finally:
        cluster.stop()


def job_options(args: argparse.Namespace) -> dict[str, Any]:
    """The job's own restart strategy, task timeout and Spark settings, checked like
    configuration."""
    restart = dict(parse_override(item) for item in args.restart_options)
    if args.restart_strategy:
        restart["restart-strategy.type"] = args.restart_strategy
    for key in restart:
        if not key.startswith("restart-strategy."):
            raise ConfigError(f"-R takes restart-strategy.* keys, not {key!r}")
    checked = Config(restart)
    options = {"restart_strategy": {key: checked[key] for key in restart} or None,
               "task_timeout": args.task_timeout, "spark_conf": spark_settings(args.spark_conf)}
    if getattr(args, "from_savepoint", None):
        options["savepoint"] = SavepointRestore(args.from_savepoint,
                                                args.allow_non_restored_state)
    elif getattr(args, "allow_non_restored_state", False):
        raise ConfigError("--allow-non-restored-state goes with --from-savepoint")
    return options


def spark_settings(assignments: list[str]) -> dict[str, str]:
    """``--conf key=value`` as spark-submit reads it: the value kept as given, the last of
    a repeated key wins, a key not starting with ``spark.`` ignored with a warning."""
    settings: dict[str, str] = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--conf takes key=value, not {assignment!r}")
        if not key.strip().startswith("spark."):
            print(f"clusterdeck: warning: ignoring non-Spark config property: {key.strip()}",
                  file=sys.stderr)
            continue
        settings[key.strip()] = value
    return settings


def submit_and_follow(client: Any, job_file: Path, job_args: list[str],
                      parallelism: int | None, detached: bool = False,
                      restart_strategy: dict[str, Any] | None = None,
                      task_timeout: float = 0.0,
                      spark_conf: dict[str, str] | None = None,
                      savepoint: SavepointRestore | None = None) -> int:
    from clusterdeck.core.client.jobclient import SubmitUnconfirmedError, new_job_id
    from clusterdeck.core.jobapi.errors import JobLoadError
    from clusterdeck.core.rpc import RemoteError
    progress = ProgressBar()
    job_id = new_job_id()
    with client.following_output(job_id, progress.printed) as feed:
        try:
            client.submit(job_file, job_args, parallelism=parallelism,
                          restart_strategy=restart_strategy, task_timeout=task_timeout,
                          spark_conf=spark_conf, job_id=job_id, savepoint=savepoint)
        except SubmitUnconfirmedError as error:
            print(f"clusterdeck: job not confirmed: {error}", file=sys.stderr)
            return EXIT_UNREACHABLE
        except JobLoadError as error:
            print(f"clusterdeck: job rejected: {error.describe()}", file=sys.stderr, end="")
            return EXIT_REJECTED
        except RemoteError as error:
            print(f"clusterdeck: job rejected by the JobManager: {error}", file=sys.stderr)
            return EXIT_REJECTED
        if detached:
            print(job_id)
            return EXIT_OK
        print(f"job {job_id} submitted", file=sys.stderr)
        result = client.wait(job_id, on_progress=progress.update)
        shown = feed.close()
    progress.close()
    print_result(result, client.reader(job_id), shown)
    return exit_code(result, EXIT_FAILED)


def exit_code(result: p.JobResult, otherwise: int) -> int:
    """The job's final status as an exit code; a PySpark script that failed with an exit
    status of its own (``sys.exit(n)``) passes it on, as spark-submit does."""
    script_status = (result.root_cause or {}).get("exit_code")
    if result.status == JobStatus.FAILED and isinstance(script_status, int) and script_status:
        return script_status
    return STATUS_EXIT.get(result.status, otherwise)


class ProgressBar:
    """finished/total subtasks on stderr; redrawn in place on a terminal, where a running
    script's Spark stages are drawn instead, as spark-submit draws them (sparkprogress.py).
    """

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = ""
        self.shown = ""  # what the last line said, its clock left out
        self.started = time.monotonic()

    def update(self, snapshot: p.JobSnapshot) -> None:
        finished, total = snapshot.graph.progress.finished, snapshot.graph.progress.total
        width = 30
        filled = width * finished // total if total else 0
        graph = snapshot.graph
        unit = "stages" if graph.spark and not graph.status.is_terminal else "subtasks"
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {finished}/{total} {unit}  "
                f"{snapshot.graph.status}  {time.monotonic() - self.started:.1f} s")
        shown = line.rsplit("  ", 1)[0]
        stages = running_stages(snapshot.graph.spark) if self.tty else []
        if stages:
            line = shown = stage_line(stages, shutil.get_terminal_size().columns - 1)
        if shown == self.shown:
            return
        self.shown = shown
        if self.tty and len(line) < len(self.last):
            sys.stderr.write("\r\x1b[K")
        self.last = line
        print(f"\r{line}" if self.tty else line, end="" if self.tty else "\n", file=sys.stderr,
              flush=True)

    def printed(self, stream: str, text: str) -> None:
        """What the job prints, shown as it arrives (MQTT thread, as ``update``); on a
        terminal the bar is cleared first and drawn again below a finished line."""
        if self.tty and self.last:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write(text)
        out.flush()
        if self.tty and self.last:
            if text.endswith("\n"):
                sys.stderr.write(self.last)
                sys.stderr.flush()
            else:
                self.last = ""  # drawn again at the next update

    def close(self) -> None:
        if self.tty and self.last:
            print(file=sys.stderr)


def print_result(result: p.JobResult, read: FileReader,
                 shown: Mapping[str, int] | None = None) -> None:
    """``read``: the job's result files, wherever this runs (JobClient.reader); ``shown``:
    the bytes of each output file already shown while the job ran (OutputFeed)."""
    from clusterdeck.core.client.jobclient import collected_rows
    shown = shown or {}
    out = sys.stderr
    print(f"job {result.job_id} ({result.name}) {result.status} in "
          f"{result.duration or 0:.2f} s", file=out)
    for name, value in sorted(result.accumulators.items()):
        print(f"  counter {name} = {value}", file=out)
    for vertex, records in sorted(result.records.items()):
        print(f"  {vertex}: {records.get('in', 0)} records in, {records.get('out', 0)} out",
              file=out)
    for path in result.outputs:
        print(f"  output: {path}", file=out)
    if result.outputs_total > len(result.outputs):
        print(f"  ... {result.outputs_total - len(result.outputs)} more outputs, all listed "
              f"in {result.files_manifest}", file=out)
    failed = result.root_cause or {}
    failed_output = _file(failed.get("stdout_path")), _file(failed.get("stderr_path"))
    if result.root_cause:
        # A failed script's stderr holds its traceback already, as spark-submit shows it.
        print_failure(result.root_cause, traceback=not _readable(failed_output[1]))
    print_output(result.stdout_paths + failed_output[0], result.stdout, sys.stdout, read, shown)
    print_output(result.stderr_paths + failed_output[1], result.stderr, sys.stderr, read, shown)
    if result.collected_paths:
        rows = collected_rows(result, read)
        for row in rows[:ROWS_SHOWN]:
            print(json.dumps(row) if not isinstance(row, str) else row)
        if len(rows) > ROWS_SHOWN:
            print(f"  ... {len(rows) - ROWS_SHOWN} more rows", file=out)


def print_output(paths: tuple[str, ...], tail: str, out: TextIO, read: FileReader,
                 shown: Mapping[str, int]) -> None:
    """All of what the job's tasks printed, from their output files, as spark-submit
    shows it, after what was ``shown`` of each while the job ran; the end the result
    carries when there are no files or one cannot be had (a failed task's, on its
    TaskManager's machine) and none of it was shown."""
    from clusterdeck.core.rpc import RpcError
    path = ""
    try:
        for path in paths:
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            for chunk in read(path, shown.get(path, 0)):
                out.write(decoder.decode(chunk))
            out.write(decoder.decode(b"", final=True))
        if paths:
            return
    except (OSError, RpcError) as error:
        if shown.get(path):
            print(f"clusterdeck: cannot read the rest of the output file {path} "
                  f"({error})", file=sys.stderr)
            return
        print(f"clusterdeck: cannot read the output file {path} ({error}); its end "
              f"follows", file=sys.stderr)
    if tail:
        print(tail, end="" if tail.endswith("\n") else "\n", file=out)


def _file(path: Any) -> tuple[str, ...]:
    return (path,) if isinstance(path, str) and path else ()


def _readable(paths: tuple[str, ...]) -> bool:
    return bool(paths) and all(os.access(path, os.R_OK) for path in paths)


def print_failure(root_cause: dict[str, Any], traceback: bool = True) -> None:
    failure = root_cause
    where = ""
    if root_cause.get("vertex_id"):
        where = (f" in {root_cause['vertex_id']} subtask {root_cause.get('subtask')} "
                 f"(attempt {root_cause.get('attempt')}, TaskManager "
                 f"{root_cause.get('taskmanager_id')})")
    print(f"root cause{where}: {failure.get('exception_type')}: {failure.get('message')}",
          file=sys.stderr)
    if traceback and failure.get("traceback"):
        print(failure["traceback"].rstrip(), file=sys.stderr)


def cmd_list(config: Config, args: argparse.Namespace) -> int:
    """Every job (or the newest ``--limit``), oldest first so the newest end up next to
    the prompt; the Dispatcher sends them in pages that fit a message."""
    if args.limit < 0:
        print("clusterdeck: --limit must be 0 (all) or more", file=sys.stderr)
        return EXIT_REJECTED
    with connected(config, args, 5.0) as client:
        listing = client.all_jobs(args.limit)
    jobs = listing.jobs[::-1]
    if len(jobs) < listing.total:
        print(f"the newest {len(jobs)} of {listing.total} jobs", file=sys.stderr)
    if args.json:
        print(json.dumps([asdict(job) for job in jobs], indent=2))
        return EXIT_OK
    print(f"{'JOB':<17} {'NAME':<24} {'STATUS':<10} {'PROGRESS':>9} {'DURATION':>9}")
    for job in jobs:
        duration = "-" if job.duration is None else f"{job.duration:.1f} s"
        print(f"{job.job_id:<17} {job.name[:24]:<24} {job.status:<10} "
              f"{job.finished:>4}/{job.total:<4} {duration:>9}")
    return EXIT_OK


def cmd_cancel(config: Config, args: argparse.Namespace) -> int:
    with connected(config, args, 5.0) as client:
        summary = client.cancel(args.job_id)
    print(f"cancel requested for job {summary.job_id} ({summary.status})", file=sys.stderr)
    return EXIT_OK


def cmd_savepoint(config: Config, args: argparse.Namespace) -> int:
    return _savepoint(config, args, stop=False, savepoint=True)


def cmd_stop(config: Config, args: argparse.Namespace) -> int:
    return _savepoint(config, args, stop=True, savepoint=args.savepoint)


def _savepoint(config: Config, args: argparse.Namespace, stop: bool, savepoint: bool) -> int:
    from clusterdeck.core.rpc import AskTimeoutError, RemoteError
    with connected(config, args, 5.0) as client:
        try:
            done = client.savepoint(args.job_id, stop, savepoint, args.timeout)
        except RemoteError as error:
            print(f"clusterdeck: {'stop' if stop else 'savepoint'} failed: {error}",
                  file=sys.stderr)
            return EXIT_FAILED
        except AskTimeoutError:
            print(f"clusterdeck: no answer within {args.timeout:g} s; the job may still "
                  f"take it (see its checkpoints)", file=sys.stderr)
            return EXIT_UNREACHABLE
    if stop:
        print(f"job {done.job_id} stopped at checkpoint {done.checkpoint_id}; it finishes "
              f"once its sinks committed", file=sys.stderr)
    if done.path:
        print(done.path)
    return EXIT_OK


def cmd_result(config: Config, args: argparse.Namespace) -> int:
    with connected(config, args, 5.0) as client:
        result = client.result(args.job_id)
        if args.json:
            print(json.dumps(asdict(result), indent=2))
        elif args.stdout or args.stderr:
            failed = _file((result.root_cause or {}).get(
                "stdout_path" if args.stdout else "stderr_path"))
            paths = (result.stdout_paths if args.stdout else result.stderr_paths) + failed
            print_output(paths, result.stdout if args.stdout else result.stderr,
                         sys.stdout, client.reader(args.job_id), {})
        else:
            print_result(result, client.reader(args.job_id))
    return exit_code(result, EXIT_OK)


def cmd_failures(config: Config, args: argparse.Namespace) -> int:
    """The root cause first, then every failure in order: what failed, where and why."""
    from clusterdeck.core.cli.causetext import chain_json, chain_lines
    with connected(config, args, 5.0) as client:
        result = client.result(args.job_id)
        history = list(result.failure_history) or client.failure_history(args.job_id)
        snapshot = client.snapshot(args.job_id, 2.0) if history else None
    causes = snapshot.graph.causes if snapshot is not None else None
    if args.json:
        print(json.dumps({"job_id": result.job_id, "status": result.status,
                          "root_cause": result.root_cause, "history": history,
                          "causes": None if causes is None else chain_json(causes)},
                         indent=2))
        return EXIT_OK
    if not history:
        print(f"job {result.job_id} ({result.status}): no failures")
        return EXIT_OK
    if causes is not None and causes.events:
        print(f"job {result.job_id} chain of causes:")
        for line in chain_lines(causes):
            print(f"  {line}")
        print()
    print(f"job {result.job_id} ({result.name}) {result.status}: {len(history)} failure(s)")
    for number, failure in enumerate(history, 1):
        root = " (root cause)" if number == 1 else ""
        print(f"\n#{number}{root} {failure.get('vertex_id')} subtask {failure.get('subtask')} "
              f"attempt {failure.get('attempt')} on {failure.get('taskmanager_id')}")
        print(f"  {failure.get('exception_type')}: {failure.get('message')}")
        if failure.get("input_splits"):
            print(f"  input splits: {failure['input_splits']}")
        for line in str(failure.get("traceback", "")).rstrip().splitlines()[-12:]:
            print(f"  | {line}")
    return EXIT_OK
