"""The bridge: whatever the threads post arrives on the GUI thread, coalesced."""

from __future__ import annotations

import dataclasses
import threading

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.bridge import JOB, ClusterBridge
from clusterdeck.gui.jobfeed import job_snapshot
from tests.gui.jobsnapshots import empty_snapshot


def test_a_burst_of_a_thousand_snapshots_becomes_a_few_signals(qtbot):
    bridge = ClusterBridge()
    received: list[int] = []
    bridge.job_changed.connect(lambda job_id, snapshot: received.append(snapshot["n"]))

    def burst() -> None:
        for n in range(1000):
            bridge.post(JOB, "job-1", {"job_id": "job-1", "n": n})

    producer = threading.Thread(target=burst)
    producer.start()
    producer.join()
    qtbot.waitUntil(lambda: bool(received) and received[-1] == 999, timeout=2000)
    assert len(received) <= 3
    bridge.close()


def test_snapshots_of_different_jobs_are_kept_apart(qtbot):
    bridge = ClusterBridge()
    latest: dict[str, int] = {}
    bridge.job_changed.connect(lambda job_id, snapshot: latest.__setitem__(job_id, snapshot))
    for n in range(10):
        bridge.post(JOB, "job-a", n)
        bridge.post(JOB, "job-b", 100 + n)
    qtbot.waitUntil(lambda: latest == {"job-a": 9, "job-b": 109}, timeout=2000)
    bridge.close()


def test_every_event_arrives_once_and_in_order(qtbot):
    bridge = ClusterBridge()
    received: list[int] = []
    bridge.cluster_events.connect(received.extend)
    producer = threading.Thread(target=lambda: [bridge.post_event(n) for n in range(500)])
    producer.start()
    producer.join()
    qtbot.waitUntil(lambda: len(received) == 500, timeout=2000)
    assert received == list(range(500))
    bridge.close()


def test_call_on_gui_thread_runs_the_function_on_the_gui_thread(qtbot):
    bridge = ClusterBridge()
    ran_on: list[threading.Thread] = []
    worker = threading.Thread(
        target=lambda: bridge.call_on_gui_thread(lambda: ran_on.append(threading.current_thread())))
    worker.start()
    worker.join()
    qtbot.waitUntil(lambda: bool(ran_on), timeout=2000)
    assert ran_on == [threading.main_thread()]
    bridge.close()


def test_reset_drops_what_is_pending_and_clears_the_views(qtbot):
    bridge = ClusterBridge()
    jobs: list[str] = []
    bridge.job_changed.connect(lambda job_id, _: jobs.append(job_id))
    bridge.post(JOB, "job-1", {})
    with qtbot.waitSignal(bridge.cleared, timeout=1000):
        bridge.reset()
    bridge.flush()
    assert jobs == []
    bridge.close()


def test_a_job_snapshot_message_is_unwrapped_to_its_job_id_and_snapshot():
    graph = empty_snapshot("job-7")
    assert job_snapshot("state/jobs/job-7", p.JobSnapshot("job-7", graph)) == ("job-7", graph)
    nameless = empty_snapshot("")  # the job id then comes from the topic
    assert job_snapshot("state/jobs/job-8", nameless) == ("job-8", nameless)
    assert job_snapshot("state/jobs/job-9", "not a snapshot") is None


def test_job_events_are_recorded_per_job_before_they_are_emitted(qtbot):
    bridge = ClusterBridge()
    seen: list[int] = []
    bridge.job_events.connect(lambda events: seen.append(bridge.recorder.count("job-a")))
    producer = threading.Thread(target=lambda: [
        bridge.post_job_event(p.JobStatusEvent("job-a" if n % 2 else "job-b", JobStatus.CREATED,
                                               JobStatus.RUNNING, float(n))) for n in range(100)])
    producer.start()
    producer.join()
    qtbot.waitUntil(lambda: bridge.recorder.count("job-b") == 50, timeout=2000)
    assert seen[-1] == 50
    assert [e.at for e in bridge.recorder.events("job-a")] == [float(n) for n in range(1, 100, 2)]
    bridge.reset()
    assert bridge.recorder.job_ids() == []
    bridge.close()


def _encoded(graph) -> bytes:
    from clusterdeck.core.rpc import Envelope, encode
    return encode(Envelope("event", "jobmaster", p.JobSnapshot(graph.job_id, graph)), 1 << 20)


def _decode(data: bytes):
    from clusterdeck.core.rpc import decode
    return decode(data, 1 << 20).message


def test_encoded_snapshots_are_decoded_off_the_posting_thread_newest_only(qtbot):
    bridge = ClusterBridge()
    latest: list[str] = []
    bridge.job_changed.connect(lambda job_id, snapshot: latest.append(snapshot.name))
    decoded_on: list[threading.Thread] = []
    release = threading.Event()

    def decode(data: bytes):
        decoded_on.append(threading.current_thread())
        release.wait(5)  # the first one is slow: the rest of the burst queues behind it
        return _decode(data)

    payloads = [_encoded(dataclasses.replace(empty_snapshot("job-1"), name=f"n{n}"))
                for n in range(50)]
    for data in payloads:
        bridge.route_encoded("state/jobs/job-1", data, decode)
    release.set()
    qtbot.waitUntil(lambda: bool(latest) and latest[-1] == "n49", timeout=5000)
    assert threading.main_thread() not in decoded_on
    assert 1 <= len(decoded_on) <= 3  # the first, perhaps a second, then the newest
    bridge.close()


def test_a_snapshot_older_than_shown_events_is_followed_by_them_again(qtbot):
    bridge = ClusterBridge()
    seen: list[tuple[str, object]] = []
    bridge.job_changed.connect(lambda job_id, snapshot: seen.append(("snapshot", job_id)))
    bridge.job_events.connect(lambda events: seen.append(("events", [e.at for e in events])))
    release = threading.Event()

    def slow_decode(data: bytes):
        release.wait(5)
        return _decode(data)

    def event(job_id: str, at: float) -> p.JobStatusEvent:
        return p.JobStatusEvent(job_id, JobStatus.CREATED, JobStatus.RUNNING, at)

    bridge.post_job_event(event("job-1", 1.0))
    bridge.route_encoded("state/jobs/job-1", _encoded(empty_snapshot("job-1")), slow_decode)
    bridge.post_job_event(event("job-1", 2.0))
    bridge.post_job_event(event("job-2", 2.5))  # another job's: not emitted again
    bridge.flush()
    assert seen == [("events", [1.0, 2.0, 2.5])]
    bridge.post_job_event(event("job-1", 3.0))
    release.set()
    qtbot.waitUntil(lambda: ("snapshot", "job-1") in seen, timeout=5000)
    # the snapshot, then the events that arrived after it, the new one last
    assert seen[1:] == [("snapshot", "job-1"), ("events", [2.0, 3.0])] or seen[1:] == [
        ("events", [3.0]), ("snapshot", "job-1"), ("events", [2.0, 3.0])]
    assert [e.at for e in bridge.recorder.events("job-1")] == [1.0, 2.0, 3.0]  # recorded once
    bridge.close()


def test_a_malformed_snapshot_is_dropped_and_the_next_one_decoded(qtbot, caplog):
    bridge = ClusterBridge()
    latest: list[str] = []
    bridge.job_changed.connect(lambda job_id, snapshot: latest.append(job_id))
    bridge.route_encoded("state/jobs/job-1", b'{"not": "an envelope"', _decode)
    qtbot.waitUntil(lambda: "dropped a message on state/jobs/job-1" in caplog.text,
                    timeout=5000)
    bridge.route_encoded("state/jobs/job-1", _encoded(empty_snapshot("job-1")), _decode)
    qtbot.waitUntil(lambda: latest == ["job-1"], timeout=5000)
    bridge.close()
