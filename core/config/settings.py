"""The effective configuration: defaults, then the TOML file, then command-line overrides.

Keys are Flink-like and dotted (``heartbeat.interval``). In the TOML file they may be
written as tables (``[heartbeat] interval = "1 s"``) or as quoted dotted keys. Durations
are seconds (a number) or a string with a unit (``"500 ms"``, ``"5 s"``, ``"2 min"``);
sizes are bytes or a string like ``"256 KiB"``. Every bad value raises ConfigError naming
the key.

Besides the options below, any other ``spark.<name>`` key is a Spark property for every
TaskManager's SparkSession: kept as the string Spark reads (``"2g"``, ``"true"``), since
Spark, not clusterdeck, knows its type. ``spark.master`` and ``spark.start`` are
clusterdeck's own options and are parsed as such.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdeck.core.config import paths


class ConfigError(ValueError):
    """A configuration value or key is wrong; the message names the key."""


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_SIZE_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2, "gb": 1000**3,
               "gib": 1024**3}


def _number_with_unit(text: str, units: Mapping[str, float]) -> float:
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    if not match:
        raise ValueError(f"cannot read {text!r}")
    number, unit = float(match.group(1)), match.group(2).lower()
    if unit not in units and unit:
        raise ValueError(f"unknown unit {unit!r} in {text!r} (known: {', '.join(units)})")
    return number * units.get(unit, 1)


def duration(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration, got a boolean")
    seconds = float(value) if isinstance(value, int | float) else _number_with_unit(
        str(value), _DURATION_UNITS)
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


def size(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected a size, got a boolean")
    number = value if isinstance(value, int) else int(_number_with_unit(str(value), _SIZE_UNITS))
    if number <= 0:
        raise ValueError("a size must be positive")
    return number


def state_memory(value: Any) -> int:
    """A state backend's memory: RocksDB needs a few memtable blocks and some cache."""
    number = size(value)
    if number < 256 * 1024:
        raise ValueError("must be at least 256 KiB")
    return number


def _whole_number(value: Any, least: int, why: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected a whole number, got {value!r}")
    number = int(value)
    if number < least:
        raise ValueError(why)
    return number


def positive_int(value: Any) -> int:
    return _whole_number(value, 1, "must be at least 1")


def non_negative_int(value: Any) -> int:
    return _whole_number(value, 0, "must be 0 or more")


def port(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected a port number")
    number = int(value)
    if not 0 <= number <= 65535:
        raise ValueError("a port is between 0 and 65535 (0: pick a free one)")
    return number


def real(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a number")
    return float(value)


def fraction(value: Any) -> float:
    """A share, above 0 and below 1."""
    share = real(value)
    if not 0.0 < share < 1.0:
        raise ValueError("a share must be above 0 and below 1")
    return share


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def one_of(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return value
    return parse


@dataclass(frozen=True)
class Option:
    key: str
    parse: Callable[[Any], Any]
    default: Any
    doc: str


DEFAULT_CLUSTER_ID = "default"
"""The cluster of a command without --cluster, and the window's first profile."""

OPTIONS: tuple[Option, ...] = (
    Option("cluster.id", text, DEFAULT_CLUSTER_ID, "Name of the cluster; all its topics live under "
           "clusterdeck/<cluster.id>/ and its state under the data dir."),
    Option("taskmanager.count", non_negative_int, 2, "TaskManagers started by `clusterdeck "
           "up`; 0 for a JobManager whose TaskManagers all join from other machines."),
    Option("taskmanager.slots", positive_int, 2, "Task slots per TaskManager."),
    Option("taskmanager.spark-work.follow", boolean, True, "Follow each PySpark script's "
           "Spark jobs, stages and failed tasks for its job's snapshot (docs/jobs.md); "
           "false: its progress stays 0/1 and its Spark work is not shown."),
    Option("taskmanager.local-execution.max-records", non_negative_int, 1000, "A source "
           "subtask whose input is at most this many records of a range or a collection "
           "(or a batch of at most this many lines and KiB of plain text files), through "
           "maps, flat maps and filters into a text or collect sink, runs in its "
           "TaskManager's Python process without a Spark job; 0: always Spark."),
    Option("heartbeat.interval", duration, 1.0, "Time between two heartbeats, both ways."),
    Option("heartbeat.timeout", duration, 6.0, "How long a silent peer is tolerated: the "
           "phi-accrual detector declares it lost within heartbeat.timeout + one interval of "
           "its last heartbeat."),
    Option("heartbeat.threshold", real, 8.0, "Phi above which a silent peer is declared lost."),
    Option("rpc.ask-timeout", duration, 10.0, "Time an ask waits for its answer."),
    Option("client.unreachable-timeout", duration, 60.0, "How long a client following a "
           "job waits for a JobManager that stopped answering before it gives up (exit 5); "
           "a JobManager restart shorter than this goes unnoticed."),
    Option("rpc.framesize", size, 256 * 1024, "Largest message the runtime sends; larger "
           "ones are refused at the sender."),
    Option("registration.initial-backoff", duration, 0.1, "First pause between two "
           "registration attempts of a TaskManager."),
    Option("registration.max-backoff", duration, 2.0, "Longest pause between two "
           "registration attempts."),
    Option("broker.kind", one_of("auto", "mosquitto", "amqtt", "external"), "auto",
           "auto: Mosquitto when installed, amqtt otherwise; external: broker.url."),
    Option("broker.bind", text, "127.0.0.1", "Address the cluster's broker listens on: "
           "127.0.0.1 keeps it on this machine; 0.0.0.0 (every interface) or one of the "
           "machine's addresses lets TaskManagers on other machines in."),
    Option("broker.host", text, "127.0.0.1", "Older name of broker.bind, still read when "
           "broker.bind is left at its default."),
    Option("broker.tls", one_of("auto", "on", "off"), "auto", "TLS on the broker's "
           "listener, with a CA made for the cluster: auto turns it on when broker.bind is "
           "beyond loopback; on/off force it."),
    Option("broker.port", port, 0, "Port of the cluster's broker; 0 picks a free one."),
    Option("broker.reconnect-timeout", duration, 60.0, "A JobManager or TaskManager "
           "whose broker connection stays broken this long exits (code 11), so that its "
           "supervisor starts it again instead of it serving no one; 0 waits for ever. A "
           "TaskManager started by hand keeps reconnecting instead."),
    Option("broker.url", text, "", "mqtt[s]://[user:password@]host:port of an external "
           "broker."),
    Option("broker.max-queued-messages", positive_int, 100_000, "Per-client queue of QoS 1 "
           "messages in Mosquitto, set high on purpose: past it, messages are dropped."),
    Option("broker.max-inflight-messages", positive_int, 100, "QoS 1 messages in flight per "
           "client."),
    Option("jobmanager.count", positive_int, 1, "JobManagers `clusterdeck up` starts: one "
           "leads, the others stand by (more than one needs ha.mode local or zookeeper)."),
    Option("ha.mode", one_of("none", "local", "zookeeper"), "none", "How a JobManager "
           "becomes the leader (docs/ha.md): none, one JobManager under the cluster's lock; "
           "local, standbys on this machine wait on a lock in ha.storage-dir; zookeeper, "
           "leader election through ZooKeeper (ha.zookeeper.quorum)."),
    Option("ha.zookeeper.quorum", text, "", "host:port[,host:port...] of the ZooKeeper "
           "ensemble; empty: `clusterdeck up` runs a ZooKeeper server of its own."),
    Option("ha.zookeeper.session-timeout", duration, 2.0, "ZooKeeper session timeout: a "
           "leader killed outright is replaced this long after its death; the server bounds "
           "it to 2-20 of its tickTime (the local server's is 0.5 s)."),
    Option("ha.storage-dir", text, "", "Folder every JobManager of the cluster reads: the "
           "job store, the leader lock and epoch of ha.mode local; empty: the cluster's "
           "data folder."),
    Option("supervisor.max-restarts", positive_int, 5, "Restarts of one process allowed "
           "within supervisor.restart-window before it is marked failed."),
    Option("supervisor.restart-window", duration, 60.0, "Window for supervisor.max-restarts."),
    Option("supervisor.restart-backoff", duration, 0.2, "First pause before a restart; "
           "doubles with each restart in the window."),
    Option("supervisor.max-backoff", duration, 10.0, "Longest pause before a restart."),
    Option("supervisor.shutdown-grace", duration, 5.0, "Time between SIGTERM and SIGKILL."),
    Option("log.max-bytes", size, 10 * 1024 * 1024, "Size at which a process log rotates."),
    Option("log.backup-count", positive_int, 3, "Rotated process logs kept."),
    Option("recorder.enabled", boolean, True, "Record the cluster (every message on its "
           "broker, every process's log) into its flight recording, recording.sqlite in "
           "the cluster's folder (docs/recorder.md)."),
    Option("recorder.max-size", size, 256 * 1024 * 1024, "Largest size of the recorded "
           "data: past it the oldest tenth is dropped."),
    Option("recorder.max-age", duration, 7 * 24 * 3600.0, "Age past which recorded rows "
           "are dropped."),
    Option("spark.master", text, "", "Spark master URL of every TaskManager; empty means "
           "local[<taskmanager.slots>]."),
    Option("spark.start", one_of("eager", "lazy"), "eager", "eager: a TaskManager starts its "
           "SparkSession when it starts (but one restarted after a crash starts it lazily); "
           "lazy: at its first task."),
    Option("job.split-size", size, 64 * 1024 * 1024, "Files larger than this are read as "
           "byte-range input splits of this size, cut at line boundaries."),
    Option("state.backend", one_of("heap", "rocksdb"), "heap", "Where a streaming "
           "subtask keeps its keyed state (open windows, running aggregates, process "
           "values): heap, in its memory, each checkpoint a copy of all of it; rocksdb, in "
           "an embedded RocksDB on the TaskManager's disk within state.backend.memory, each "
           "checkpoint only what changed since the last (incremental). Read by each "
           "TaskManager; a job restores only on the backend that checkpointed it, but heap "
           "state restores into rocksdb."),
    Option("state.backend.memory", state_memory, 64 * 1024 * 1024, "Memory of one subtask's "
           "RocksDB (block cache and memtables) with state.backend rocksdb: keyed state "
           "beyond it lives on the disk. At least 256 KiB."),
    Option("state.savepoints.dir", text, "", "Folder of the cluster's savepoints "
           "(`clusterdeck savepoint`, `stop --savepoint`); a job starts only from a savepoint "
           "in it. Empty: `savepoints` in the cluster's folder."),
    Option("jobmanager.slot-request-timeout", duration, 300.0, "A streaming job runs only "
           "with a slot for every subtask at once; one that waited this long for its slots "
           "fails with NoResourceAvailable (Flink's slot.request.timeout)."),
    Option("jobmanager.cancel-timeout", duration, 30.0, "A cancelled attempt whose "
           "TaskManager has not confirmed the cancel within this long is taken as CANCELED, "
           "so a cancel always ends."),
    Option("jobmanager.max-parallelism", positive_int, 10_000, "Widest vertex a job may "
           "have; a submission with a wider one is refused."),
    Option("jobmanager.job-list.retained", positive_int, 100, "Jobs the retained "
           "state/joblist carries (what the desktop app lists): every running job first, "
           "then the newest ended ones, fewer when they would not fit rpc.framesize; "
           "`clusterdeck list` pages through all of them."),
    Option("jobmanager.upload-timeout", duration, 600.0, "An artifact upload not submitted "
           "within this time of its first chunk is dropped."),
    Option("jobmanager.max-artifact-size", size, 256 * 1024 * 1024, "Largest job artifact "
           "the Dispatcher accepts; an upload that grows past it is refused and dropped."),
    Option("jobmanager.max-uploads", positive_int, 16, "Artifact uploads in progress at "
           "once; a new one beyond it is refused until one is submitted or times out."),
    Option("jobstore.retention.max-jobs", positive_int, 1000, "Ended jobs kept in the job "
           "store; beyond it the oldest are deleted with their work dir (partitions, "
           "collected rows) and attempt logs."),
    Option("jobstore.retention.max-age", duration, 7 * 86400.0, "Ended jobs older than "
           "this (since they ended) are deleted like those beyond max-jobs."),
    Option("resourcemanager.max-taskmanagers", positive_int, 256, "Registered TaskManagers "
           "at once; a registration beyond it is refused, so the cluster overview fits "
           "rpc.framesize."),
    Option("resourcemanager.max-lost-taskmanagers", positive_int, 64, "Lost TaskManagers "
           "the cluster overview keeps (with their cause); the longest lost are forgotten "
           "first."),
    Option("resourcemanager.lost-taskmanager-retention", duration, 300.0, "How long a lost "
           "TaskManager stays in the cluster overview before it is forgotten."),
    Option("elastic.provider", one_of("none", "local", "command"), "none", "Who starts "
           "and stops TaskManagers on the ResourceManager's demand (docs/elastic.md): none, "
           "only those started by hand; local, the supervisor on this machine; command, "
           "the supervisor runs elastic.command for each."),
    Option("elastic.command", text, "", "With elastic.provider command: the command line "
           "that runs one TaskManager, with {name} (its id and login), {index} (n of "
           "taskmanager-<n>) and {cluster}; it gets the TaskManager's credentials file on "
           "standard input (`clusterdeck taskmanager --credentials -`)."),
    Option("elastic.min-taskmanagers", non_negative_int, 1, "TaskManagers the "
           "ResourceManager keeps running with a provider; idle ones beyond it are stopped."),
    Option("elastic.max-taskmanagers", positive_int, 4, "TaskManagers at most, those "
           "started by hand included; slot requests beyond the free slots start new ones up "
           "to it, and a job that needs more slots at once than it allows is refused."),
    Option("elastic.idle-timeout", duration, 30.0, "A TaskManager the ResourceManager "
           "started that has had every slot free this long is stopped (down to "
           "elastic.min-taskmanagers)."),
    Option("elastic.start-timeout", duration, 60.0, "A TaskManager asked for that has not "
           "registered within this long counts as a failed start."),
    Option("elastic.start-backoff", duration, 1.0, "Pause after a failed start before the "
           "next, doubling with each failure in a row."),
    Option("elastic.max-start-backoff", duration, 60.0, "Longest pause after failed "
           "starts."),
    Option("scheduler.mode", one_of("default", "reactive"), "default", "default: a job "
           "runs at the parallelism it was submitted with; reactive: a streaming job takes "
           "every slot of the cluster and rescales from its latest checkpoint when "
           "TaskManagers join or leave (Flink's reactive mode)."),
    Option("scheduler.reactive.stabilization", duration, 3.0, "In reactive mode, how long "
           "the cluster's slots must stay unchanged after a TaskManager joined or left "
           "before a job rescales to them (one rescale for several changes in a row)."),
    Option("autoscaler.enabled", boolean, False, "The autoscaler: a running streaming "
           "job's vertex busy above autoscaler.target-busy (or backpressuring its "
           "producers) is raised, one below autoscaler.idle-busy lowered, from its latest "
           "checkpoint as reactive mode rescales (docs/elastic.md, Autoscaler)."),
    Option("autoscaler.window", duration, 20.0, "Seconds of live numbers a decision is "
           "made from; a job's new run decides nothing before it filled one."),
    Option("autoscaler.target-busy", fraction, 0.8, "Busy share a vertex is raised above, "
           "and the share a rescale aims under."),
    Option("autoscaler.idle-busy", fraction, 0.3, "Busy share a vertex is lowered below "
           "(keep it under half the target, or decisions could undo each other)."),
    Option("autoscaler.stabilization", duration, 10.0, "Seconds of each new subtask "
           "attempt's numbers the autoscaler leaves out (its start is not its load)."),
    Option("autoscaler.cooldown", duration, 30.0, "Seconds after a decision before the "
           "job's next one."),
    Option("autoscaler.min-parallelism", positive_int, 1, "Lowest parallelism the "
           "autoscaler lowers a vertex to."),
    Option("autoscaler.max-parallelism", non_negative_int, 0, "Highest parallelism the "
           "autoscaler raises a vertex to; 0: as far as the cluster's free slots allow."),
    Option("taskmanager.data.bind", text, "auto", "Address the TaskManager's data service "
           "(its result partitions, for TaskManagers that share no folder with it) listens "
           "on. auto: 127.0.0.1 when the broker is on loopback, every interface otherwise."),
    Option("taskmanager.data.port", port, 0, "Port of the data service; 0 "
           "picks a free one, announced in the TaskManager's registration."),
    Option("taskmanager.data.host", text, "", "Address other TaskManagers reach the data "
           "service at; empty: the address this machine reaches the broker from."),
    Option("taskmanager.data.tls", one_of("auto", "always"), "auto", "auto: TLS (with a "
           "self-signed certificate pinned through the registration) unless it listens on "
           "loopback only, the broker's rule; always: TLS on loopback too."),
    Option("taskmanager.data.fetch-timeout", duration, 10.0, "How long a fetch of a "
           "partition from another TaskManager's data service may stall (a connect or a "
           "read) before it is tried again; after three tries the consumer fails with "
           "PartitionNotFound naming the producer's TaskManager."),
    Option("taskmanager.data.connect-timeout", duration, 60.0, "How long a streaming "
           "task's input channel tries to reach its producer's stream channel server "
           "(refused or unanswered connections are tried again) before the task fails, "
           "naming the producer's TaskManager, which the job then blocks a while."),
    Option("taskmanager.data.max-connections", positive_int, 16, "Requests the data "
           "service serves at once; more wait for a free one."),
    Option("taskmanager.attempt-log.max-size", size, 2 * 1024 * 1024, "Largest attempt "
           "log: its first part is kept, then only its latest lines (in <attempt>.log.end "
           "and .end.1). A TaskManager's journal of quick, quiet attempts rotates at four "
           "times this."),
    Option("taskmanager.attempt-log.max-files", positive_int, 1000, "Attempt logs kept per "
           "cluster log folder; the oldest are deleted when a new attempt starts."),
    Option("jobmanager.execution.failover-strategy", one_of("region", "full"), "region",
           "region: re-run the failed subtasks and what lost data they need; full: cancel "
           "every running subtask and re-run all unfinished ones."),
    Option("jobmanager.scheduler.deploy-ahead", duration, 1.0,
           "Deploy attempts into a busy slot whose vertex's tasks take less than this "
           "(one, up to 32 behind the shortest: as many as cover 100 ms), each to start "
           "on its TaskManager the moment the one before ends; 0: never."),
    Option("jobmanager.blocklist.timeout", duration, 60.0, "A TaskManager where an "
           "attempt failed for want of what its host lacks (a full disk: DiskFull) gets "
           "none of the job's new work for this long while others have free slots; with "
           "none, the work waits for the block to end. 0: never block (Flink's "
           "cluster.resource-blocklist.item.timeout)."),
    Option("restart-strategy.type", one_of("none", "fixed-delay", "failure-rate",
                                           "exponential-delay"), "fixed-delay",
           "How a job restarts failed tasks; overridable per job."),
    Option("restart-strategy.fixed-delay.attempts", positive_int, 3, "Restarts before the "
           "job fails."),
    Option("restart-strategy.fixed-delay.delay", duration, 1.0, "Pause before a restart."),
    Option("restart-strategy.failure-rate.max-failures", positive_int, 3, "Failures allowed "
           "within the interval."),
    Option("restart-strategy.failure-rate.interval", duration, 60.0, "Window of "
           "max-failures."),
    Option("restart-strategy.failure-rate.delay", duration, 1.0, "Pause before a restart."),
    Option("restart-strategy.exponential-delay.initial", duration, 1.0, "First pause."),
    Option("restart-strategy.exponential-delay.max", duration, 60.0, "Longest pause."),
    Option("restart-strategy.exponential-delay.multiplier", real, 2.0, "Growth per restart."),
    Option("restart-strategy.exponential-delay.jitter", real, 0.1, "Random share of a pause."),
)

_BY_KEY = {option.key: option for option in OPTIONS}

SPARK_PREFIX = "spark."
# Dot-separated parts, none empty; no space, and nothing that would need escaping in the
# quoted key `config show` prints or that spark-submit's ``--conf key=value`` splits on.
_SPARK_PART = re.compile(r'[^\s.="\\]+')
# Each would make a TaskManager's session something other than what it is built on: a
# classic Spark driver inside the TaskManager's process (its SparkContext is watched and
# restarted there). Where its Spark runs is spark.master's business.
_REFUSED_SPARK_KEYS = ("spark.remote", "spark.api.mode", "spark.submit.deployMode")


def is_spark_property(key: str) -> bool:
    """A key handed to Spark as it is: under ``spark.`` and not one of our own options."""
    return key.startswith(SPARK_PREFIX) and key not in _BY_KEY


def _check_spark_key(key: str) -> None:
    parts = key.split(".")[1:]
    if not all(_SPARK_PART.fullmatch(part) and part.isprintable() for part in parts):
        raise ConfigError(f"bad Spark property name {key!r}: its dot-separated parts must "
                          "be non-empty, without spaces, '=', quotes or backslashes")
    if key in _REFUSED_SPARK_KEYS:
        raise ConfigError(f"{key} cannot be set: every TaskManager runs Spark's classic "
                          "driver in its own process (spark.master chooses where its work "
                          "runs)")


def spark_value(value: Any) -> str:
    """A TOML value in the form Spark reads (it parses every property from a string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return value
    raise ValueError(f"expected a string, a number or true/false, got {value!r}")


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict) and full not in _BY_KEY:
            yield from _flatten(value, f"{full}.")
        else:
            yield full, value


class Config(Mapping[str, Any]):
    """An immutable, validated set of option values."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        merged = {option.key: option.default for option in OPTIONS}
        merged.update(_validated(values or {}))
        self._values = merged

    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            raise ConfigError(f"unknown configuration key {key!r}")
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
        return Config({**self._values, **overrides})

    def changed(self) -> dict[str, Any]:
        """The values that differ from the defaults; every Spark property (none has one)."""
        return {k: v for k, v in self._values.items()
                if k not in _BY_KEY or v != _BY_KEY[k].default}

    def spark_properties(self) -> dict[str, str]:
        """The ``spark.*`` keys that are not options of ours, sorted by key."""
        return {k: self._values[k] for k in sorted(self._values) if is_spark_property(k)}

    def to_toml(self) -> str:
        """Every value as quoted dotted keys (what ``load`` reads back): the options in
        their documented order, then the Spark properties."""
        values = {**{option.key: self._values[option.key] for option in OPTIONS},
                  **self.spark_properties()}
        return "".join(f"{_toml_string(key)} = {_toml_value(value)}\n"
                       for key, value in values.items())


def _validated(values: Mapping[str, Any]) -> dict[str, Any]:
    result = {}
    for key, raw in values.items():
        parse = _parser(key)
        try:
            result[key] = parse(raw)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"bad value for {key}: {error}") from None
    return result


def _parser(key: str) -> Callable[[Any], Any]:
    option = _BY_KEY.get(key)
    if option is not None:
        return option.parse
    if key.startswith(SPARK_PREFIX):
        _check_spark_key(key)
        return spark_value
    raise ConfigError(f"unknown configuration key {key!r}")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return _toml_string(str(value))


def _toml_string(text: str) -> str:
    """A TOML basic string; control characters (a Spark property's value may hold a
    newline) are escaped, or the file would not read back."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c
                      for c in escaped)
    return f'"{escaped}"'


def parse_override(assignment: str) -> tuple[str, str]:
    """Read ``key=value`` as given with ``-D`` on the command line."""
    key, sep, value = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"expected key=value, got {assignment!r}")
    return key.strip(), value.strip()


def load(path: Path | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Defaults, then ``path`` (the user's config file when None), then ``overrides``."""
    if path is not None and not path.exists():
        raise ConfigError(f"configuration file {path} does not exist")
    path = path or paths.config_file()
    values: dict[str, Any] = {}
    if path.exists():
        try:
            values.update(_flatten(tomllib.loads(path.read_text(encoding="utf-8"))))
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path.name}: {error}") from None
    values.update(overrides or {})
    return Config(values)
