"""Live numbers (docs/metrics.md): each TaskManager's attempts and heap, once a second."""

from __future__ import annotations

from dataclasses import dataclass

from clusterdeck.core.rpc import message

ATTEMPT_WORKERS = 8  # workers one AttemptMetrics names: its slot thread and a Spark worker


@message
@dataclass(frozen=True)
class AttemptWorker:
    """Where an attempt's code runs now, on its TaskManager's machine: a process
    (``thread`` 0: a Spark Python worker running its user functions) or one thread of one
    (``thread``: the native id of the TaskManager's slot thread running it), so a flame
    graph can be taken of exactly these (docs/profiling.md)."""

    pid: int
    thread: int = 0


@message
@dataclass(frozen=True)
class AttemptMetrics:
    """One attempt's numbers so far: records and bytes in and out, seconds it has run.
    ``final``: it ended and these are its last (a finished one's equal its TaskResult's).

    A streaming attempt's too: ``backpressured``, seconds so far it waited for its
    consumers to take its buffers (a total, as ``busy``: the window takes its share of
    each second, Flink's backPressuredTimeMsPerSecond, from two messages, so a lost one
    costs nothing); ``watermark``, the event time (seconds) it last sent on, a sink's
    input watermark, None while it has none; ``watermark_end``: its watermark is the end
    of event time (infinity, which JSON has not: ``watermark`` is then None). Defaults for
    a batch attempt and for senders that predate them. ``workers``: where its code runs
    now (``AttemptWorker``), empty once it ended."""

    job_id: str
    vertex_id: str
    subtask: int
    attempt: int
    attempt_id: str
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    busy: float
    final: bool = False
    backpressured: float = 0.0
    watermark: float | None = None
    watermark_end: bool = False
    workers: tuple[AttemptWorker, ...] = ()  # at most ATTEMPT_WORKERS


METRICS_ATTEMPTS = 200  # AttemptMetrics in one TaskManagerMetrics: about 75 kB at most
URL_LIMIT = 512  # characters of an address a message carries (a Spark UI's)


@message
@dataclass(frozen=True)
class TaskManagerMetrics:
    """TaskExecutor -> ``metrics/<taskmanager-id>`` (QoS 0, not retained): once a second
    while it runs tasks (every attempt running, and those that ended since), every few
    seconds when idle (its heap only). ``heap_used``/``heap_max``: its Spark JVM's heap in
    bytes, -1 before the JVM is up; ``spark_ui``: its Spark UI's address, "" without one."""

    taskmanager_id: str
    time: float
    attempts: tuple[AttemptMetrics, ...] = ()
    heap_used: int = -1
    heap_max: int = -1
    spark_ui: str = ""
