"""The one marshalling point between the cluster and the widgets.

Three kinds of threads produce what the GUI draws: paho's network thread (ClusterClient
subscriptions: the retained ClusterOverview, cluster events, job snapshots, the job list,
job results, job events, and the control-plane tap), the supervisor's thread (process
status changes) and the resource sampler's thread. None of them may touch a widget. They
call ``ClusterBridge.post``/``post_event``/``post_job_event``/``post_traffic``, which only
store the value under a lock: the latest value per key replaces the previous one, events
and traffic are queued in order (traffic in a bounded backlog). A QTimer on the GUI
thread drains that store at most ``rate_hz`` times a second and emits Qt signals, so a
burst of a thousand snapshots costs one redraw and a thousand messages one table update.

Job snapshots (a megabyte for 1,000 subtasks) are not decoded on paho's thread: their
subscription takes the payload as it travelled and ``latestdecoder`` decodes the newest
of each job on a thread of its own, so the events behind a snapshot are not held up by
it. A snapshot so decoded can be older than events already shown: each snapshot carries
the count of job events posted when it arrived, and the tick that emits it emits again,
after it, the job's events that arrived later (a cell only moves forward on an event, so
one applied twice changes nothing).

Job events (ExecutionStateEvent, JobStatusEvent) are also kept per job, bounded, in
``recorder`` (filled on the GUI thread at each tick) for the replay of a job.

Widgets connect to the signals and never see a client or a supervisor. Session code
that must run something on the GUI thread after a blocking call on a worker thread uses
``call_on_gui_thread``, which goes through the same object.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.rpc.mqtt import Traffic
from clusterdeck.core.supervisor import ProcessInfo, Supervisor
from clusterdeck.gui.jobfeed import (
    JOB_EVENTS_FILTER,
    JOB_RESULTS_FILTER,
    JOB_STATE_FILTER,
    job_snapshot,
)
from clusterdeck.gui.latestdecoder import Decode, LatestDecoder
from clusterdeck.gui.models.recorder import JobRecorder
from clusterdeck.gui.sampler import ResourceSample, ResourceSampler

OVERVIEW = "overview"
PROCESS = "process"
JOB = "job"
RESOURCES = "resources"
JOB_LIST = "joblist"
RESULT = "result"

TRAFFIC_BACKLOG = 20_000
"""Tapped messages kept between two ticks at most (the oldest go first)."""
TRAFFIC_PAYLOAD_LIMIT = 64 * 1024
"""A tapped message larger than this keeps its size and type, not its decoded payload (an
artifact chunk is up to half a frame; 20,000 of them would be gigabytes)."""
_JOB_EVENT_BACKLOG = 200_000
_LATE_EVENTS_KEPT = 20_000
"""Job events kept after they were emitted, to be emitted again after a snapshot that
arrived before them (40 s at 500 a second; a snapshot is decoded within a second)."""

_METRICS_BACKLOG = 10_000  # TaskManagerMetrics between two ticks (a few per TaskManager)
_BROKER_POLL_TICKS = 10  # the broker's connection state is looked at every 10th tick


class ClusterBridge(QObject):
    """Cluster events in (any thread), coalesced Qt signals out (GUI thread).

    Create it on the GUI thread. ``post``, ``post_event`` and ``call_on_gui_thread`` are
    thread-safe; every other method belongs to the GUI thread.
    """

    overview_changed = Signal(object)
    """The latest ``ClusterOverview``."""
    processes_changed = Signal(object)
    """``ProcessInfo``s of the supervised processes that changed since the last tick."""
    job_changed = Signal(str, object)
    """``(job_id, JobGraphSnapshot)``, the latest snapshot of one job."""
    resources_changed = Signal(object)
    """``{pid: ResourceSample}`` of the watched processes."""
    cluster_events = Signal(object)
    """Every ``TaskManagerRegistered``/``TaskManagerLost`` since the last tick, in order."""
    broker_changed = Signal(str)
    """``connected``, ``disconnected`` or ``none`` (no client)."""
    cleared = Signal()
    """The cluster is gone from view (stopped or detached): views forget what they show."""
    job_list_changed = Signal(object)
    """The latest retained ``JobList``."""
    job_result_changed = Signal(str, object)
    """``(job_id, JobResult)``: a job's retained result (it ended)."""
    job_events = Signal(object)
    """``ExecutionStateEvent``s and ``JobStatusEvent``s since the last tick, in order;
    already in ``recorder`` when emitted. Preceded by the earlier ones of a job whose
    snapshot, emitted in this tick, arrived before them (emitted again, not recorded)."""
    traffic = Signal(object)
    # list[TaskManagerMetrics]: the TaskManagers' live numbers since the last tick
    metrics = Signal(object)
    # list[(time, process name, CPU %, resident bytes)]: a recording's process samples
    samples = Signal(object)
    """``Traffic`` records of the control plane since the last tick, in order."""

    _invoke = Signal(object)

    def __init__(self, parent: QObject | None = None, rate_hz: float = 30.0) -> None:
        super().__init__(parent)
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, str], Any] = {}
        self._events: list[Any] = []
        self._job_events: deque[tuple[int, Any]] = deque(maxlen=_JOB_EVENT_BACKLOG)
        self._job_event_count = 0  # job events posted so far: a snapshot's arrival mark
        self._snapshot_marks: dict[str, int] = {}  # job id -> mark of its pending snapshot
        self._emitted: deque[tuple[int, Any]] = deque(maxlen=_LATE_EVENTS_KEPT)  # GUI thread
        self._decoder = LatestDecoder()
        self._traffic: deque[Traffic] = deque(maxlen=TRAFFIC_BACKLOG)
        self._metrics: deque[p.TaskManagerMetrics] = deque(maxlen=_METRICS_BACKLOG)
        self._samples: list[tuple[float, str, float, int]] = []
        self.recorder = JobRecorder()
        self._client: JobClient | None = None
        self._supervisor: Supervisor | None = None
        self._listener: Callable[[ProcessInfo], None] | None = None
        # Bumped on every disconnect, so late callbacks of an old source are dropped.
        self._client_generation = 0
        self._supervisor_generation = 0
        self._broker_state = ""
        self._ticks = 0
        self._sampler = ResourceSampler(self._on_samples)
        self._invoke.connect(self._run_invoked, Qt.ConnectionType.QueuedConnection)
        self._timer = QTimer(self)
        self._timer.setInterval(max(1, round(1000 / rate_hz)))
        self._timer.timeout.connect(self.flush)
        self._timer.start()

    # -- producers (any thread) --------------------------------------------------------------

    def post(self, channel: str, key: str, value: Any) -> None:
        """Keep ``value`` as the latest of ``(channel, key)``; emitted at the next tick."""
        with self._lock:
            self._latest[(channel, key)] = value

    def post_event(self, event: Any) -> None:
        """Queue an event; every event is emitted, in order, at the next tick."""
        with self._lock:
            self._events.append(event)

    def post_job_event(self, event: Any) -> None:
        """Queue a job's ``ExecutionStateEvent``/``JobStatusEvent``; recorded and emitted
        at the next tick."""
        with self._lock:
            self._job_event_count += 1
            self._job_events.append((self._job_event_count, event))

    def post_traffic(self, record: Traffic) -> None:
        """Queue one tapped control-plane message (paho's thread); a large payload is
        dropped here, its size and type kept."""
        if record.size > TRAFFIC_PAYLOAD_LIMIT and record.message is not None:
            record = dataclasses.replace(record, message=None, error=record.error or (
                f"payload of {record.size} bytes not kept"))
        with self._lock:
            self._traffic.append(record)

    def route(self, topic: str, message: Any) -> None:
        """One message of the cluster's (a live subscription's or a recording's), queued for
        the views that show it (any thread)."""
        if isinstance(message, p.ClusterOverview):
            self.post(OVERVIEW, "", message)
        elif isinstance(message, p.JobList):
            self.post(JOB_LIST, "", message)
        elif isinstance(message, p.JobResult):
            self.post(RESULT, message.job_id, message)
        elif isinstance(message, p.TaskManagerMetrics):
            with self._lock:
                self._metrics.append(message)
        elif topic == topics.CLUSTER_EVENTS:
            self.post_event(message)
        elif topic.startswith(topics.job_events("")):
            for event in p.job_events_in(message):
                self.post_job_event(event)
        else:
            self._post_snapshot(topic, message, mark=None)

    def route_encoded(self, topic: str, data: bytes, decode: Decode) -> None:
        """A job's snapshot as it travelled (paho's thread): decoded on the decoder's
        thread, newest first, then queued like ``route``'s."""
        with self._lock:
            mark = self._job_event_count
        generation = self._client_generation

        def deliver(message: Any) -> None:  # the decoder's thread
            if generation == self._client_generation:  # else the cluster is gone from view
                self._post_snapshot(topic, message, mark)

        self._decoder.put(topic, data, decode, deliver)

    def _post_snapshot(self, topic: str, message: Any, mark: int | None) -> None:
        """``mark``: the job events posted when the snapshot arrived (None: all of them)."""
        if (found := job_snapshot(topic, message)) is None:
            return
        job_id, snapshot = found
        with self._lock:
            self._latest[(JOB, job_id)] = snapshot
            self._snapshot_marks[job_id] = self._job_event_count if mark is None else mark

    def post_samples(self, samples: list[tuple[float, str, float, int]]) -> None:
        """Recorded process samples (a recording's worker), emitted at the next tick."""
        with self._lock:
            self._samples.extend(samples)

    def call_on_gui_thread(self, function: Callable[[], None]) -> None:
        """Run ``function`` on the GUI thread soon (a queued signal, not a tick)."""
        self._invoke.emit(function)

    # -- sources (GUI thread) ----------------------------------------------------------------

    @property
    def client(self) -> JobClient | None:
        """The client followed now (GUI thread); job commands use it on a worker."""
        return self._client

    def connect_client(self, client: JobClient) -> None:
        """Follow a cluster through ``client``: its state, its events, its jobs, and the
        whole control plane (a tap)."""
        self.disconnect_client()
        generation = self._client_generation
        self._client = client

        def on_state(topic: str, message: Any) -> None:  # paho's network thread
            if generation == self._client_generation and isinstance(message, p.ClusterOverview):
                self.route(topic, message)
                self._watch_pids(overview=message)

        def on_message(topic: str, message: Any) -> None:  # paho's network thread
            if generation == self._client_generation:
                self.route(topic, message)

        def on_traffic(record: Traffic) -> None:  # paho's network thread
            if generation == self._client_generation:
                self.post_traffic(record)

        def on_snapshot(topic: str, data: bytes) -> None:  # paho's network thread
            if generation == self._client_generation:
                self.route_encoded(topic, data, client.service.decode_event)

        client.service.subscribe(topics.CLUSTER_STATE, on_state)
        client.service.subscribe(JOB_STATE_FILTER, on_snapshot, decoded=False)
        for topic_filter in (topics.CLUSTER_EVENTS, topics.JOB_LIST, JOB_RESULTS_FILTER,
                             JOB_EVENTS_FILTER, topics.METRICS_ALL):
            client.service.subscribe(topic_filter, on_message)
        if client.observing:  # else the session said why the messages view stays empty
            client.tap(on_traffic)
        self._sampler.start()

    def disconnect_client(self) -> JobClient | None:
        """Stop following the current client and hand it back (the caller closes it)."""
        client, self._client = self._client, None
        if client is not None:
            self._client_generation += 1
        return client

    def connect_supervisor(self, supervisor: Supervisor) -> None:
        """Follow the supervised processes; their current snapshots are emitted at once."""
        self.disconnect_supervisor()
        generation = self._supervisor_generation
        self._supervisor = supervisor

        def on_process(info: ProcessInfo) -> None:  # the supervisor's thread
            if generation == self._supervisor_generation:
                self.post(PROCESS, info.name, info)
                self._watch_pids()

        self._listener = on_process
        supervisor.add_listener(on_process)
        for info in supervisor.processes():
            self.post(PROCESS, info.name, info)
        self._watch_pids()
        self._sampler.start()

    def disconnect_supervisor(self) -> None:
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None and self._listener is not None:
            self._supervisor_generation += 1
            supervisor.remove_listener(self._listener)
            self._listener = None

    def reset(self) -> None:
        """Leave every source, drop what is pending and tell the views to forget it all.
        A client still followed is dropped, not closed: take it first with
        ``disconnect_client`` to close it."""
        self.disconnect_supervisor()
        self.disconnect_client()
        self._sampler.watch(())
        self._decoder.clear()
        with self._lock:
            self._latest.clear()
            self._snapshot_marks.clear()
            self._events.clear()
            self._job_events.clear()
            self._emitted.clear()
            self._traffic.clear()
            self._metrics.clear()
            self._samples.clear()
        self.recorder.clear()
        self._poll_broker()
        self.cleared.emit()

    def close(self) -> None:
        """Leave every source; the client is not closed here (the session owns it)."""
        self.disconnect_supervisor()
        self.disconnect_client()
        self._sampler.stop()
        self._decoder.close()
        self._timer.stop()

    def _on_samples(self, samples: dict[int, ResourceSample]) -> None:
        """Sampler thread."""
        self.post(RESOURCES, "", samples)

    def _watch_pids(self, overview: p.ClusterOverview | None = None) -> None:
        """Any thread: sample every supervised process, or, attached to a cluster we do not
        supervise, the JobManager and the TaskManagers the overview names (when local)."""
        supervisor = self._supervisor
        if supervisor is not None:
            pids: Iterable[int | None] = (info.pid for info in supervisor.processes())
        elif overview is not None:
            pids = [overview.jobmanager_pid, *(tm.pid for tm in overview.taskmanagers
                                               if tm.state is p.TaskManagerState.REGISTERED)]
        else:
            return
        self._sampler.watch(pid for pid in pids if pid)

    # -- the tick (GUI thread) ---------------------------------------------------------------

    @Slot()
    def flush(self) -> None:
        """Emit what arrived since the last tick: one signal per kind (per job for jobs)."""
        self._ticks += 1
        if self._ticks % _BROKER_POLL_TICKS == 0:
            self._poll_broker()
        with self._lock:
            latest, self._latest = self._latest, {}
            marks, self._snapshot_marks = self._snapshot_marks, {}
            events, self._events = self._events, []
            job_events = list(self._job_events)
            self._job_events.clear()
            traffic = list(self._traffic)
            self._traffic.clear()
            metrics = list(self._metrics)
            self._metrics.clear()
            samples, self._samples = self._samples, []
        if not (latest or events or job_events or traffic or metrics or samples):
            return
        processes = [value for (channel, _), value in latest.items() if channel == PROCESS]
        if processes:
            self.processes_changed.emit(processes)
        if (OVERVIEW, "") in latest:
            self.overview_changed.emit(latest[(OVERVIEW, "")])
        if events:
            self.cluster_events.emit(events)
        if (RESOURCES, "") in latest:
            self.resources_changed.emit(latest[(RESOURCES, "")])
        if (JOB_LIST, "") in latest:
            self.job_list_changed.emit(latest[(JOB_LIST, "")])
        for (channel, key), value in latest.items():
            if channel == JOB:
                self.job_changed.emit(key, value)
        late = self._events_after(marks)
        if job_events:
            self.recorder.record([event for _, event in job_events])
            self._emitted.extend(job_events)
        if late or job_events:
            self.job_events.emit(late + [event for _, event in job_events])
        for (channel, key), value in latest.items():
            if channel == RESULT:
                self.job_result_changed.emit(key, value)
        if traffic:
            self.traffic.emit(traffic)
        if metrics:
            self.metrics.emit(metrics)
        if samples:
            self.samples.emit(samples)

    def _events_after(self, marks: dict[str, int]) -> list[Any]:
        """The emitted job events that arrived after the snapshot of their job emitted now,
        in order."""
        if not marks:
            return []
        oldest = min(marks.values())
        late: list[Any] = []
        for count, event in reversed(self._emitted):
            if count <= oldest:
                break
            if count > marks.get(getattr(event, "job_id", ""), count):
                late.append(event)
        late.reverse()
        return late

    def _poll_broker(self) -> None:
        client = self._client
        state = "none" if client is None else (
            "connected" if client.service.is_connected else "disconnected")
        if state != self._broker_state:
            self._broker_state = state
            self.broker_changed.emit(state)

    @Slot(object)
    def _run_invoked(self, function: Callable[[], None]) -> None:
        function()
