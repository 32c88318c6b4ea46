"""The bridge: whatever the threads post arrives on the GUI thread, coalesced."""

from __future__ import annotations

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
