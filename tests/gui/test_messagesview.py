"""The messages view: tapped traffic in a bounded table, filtered, paused, decoded."""

from __future__ import annotations

import threading

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc.mqtt import Traffic
from clusterdeck.gui.bridge import TRAFFIC_PAYLOAD_LIMIT, ClusterBridge
from clusterdeck.gui.models.trafficmodel import TrafficModel
from clusterdeck.gui.views.messagesview import MessagesView, payload_text


def traffic(n: int, type_name: str = "UpdateTaskExecutionState", sender: str = "taskmanager-1",
            receiver: str = "jobmaster-1", channel: str = "rpc", message: object = None,
            size: int = 300) -> Traffic:
    return Traffic(1000.0 + n, channel, receiver, sender, "tell", type_name, size, message)


def test_the_ring_keeps_the_newest_messages_only(qtbot):
    model = TrafficModel(capacity=100)
    removed: list[int] = []
    model.rowsRemoved.connect(lambda _p, first, last: removed.append(last - first + 1))
    for start in range(0, 250, 50):
        model.append([traffic(n) for n in range(start, start + 50)])
    assert model.rowCount() == 100
    assert model.record(0).at == 1150.0 and model.record(99).at == 1249.0
    assert model.dropped == 150
    assert removed == [50, 50, 50], "one removal per batch, not one per message"


def test_filters_by_type_endpoint_and_heartbeats(qtbot):
    view = MessagesView()
    qtbot.addWidget(view)
    view.add([traffic(0), traffic(1, "SubmitTask", "jobmaster-1", "taskexecutor.tm-2"),
              traffic(2, "TaskManagerHeartbeat", channel="heartbeat", receiver="resourcemanager")])
    assert view.proxy.rowCount() == 3
    view.select_type("SubmitTask")
    assert view.proxy.rowCount() == 1
    view.select_type("all types")
    view.endpoint.setText("tm-2")
    assert view.proxy.rowCount() == 1
    view.endpoint.setText("")
    view.heartbeats.setChecked(False)
    assert view.proxy.rowCount() == 2
    assert "2 of 3 shown" in view.count.text()


def test_paused_the_table_holds_still_and_resume_adds_what_came(qtbot):
    view = MessagesView()
    qtbot.addWidget(view)
    view.add([traffic(0)])
    view.pause.setChecked(True)
    view.add([traffic(1), traffic(2)])
    assert view.model.rowCount() == 1
    assert "2 waiting" in view.count.text()
    view.pause.setChecked(False)
    assert view.model.rowCount() == 3


def test_selecting_a_message_shows_its_payload_as_json(qtbot):
    view = MessagesView()
    qtbot.addWidget(view)
    message = p.JobStatusEvent("job-1", JobStatus.CREATED, JobStatus.RUNNING, 5.0)
    view.add([traffic(0, "JobStatusEvent", message=message)])
    view.select_row(0)
    text = view.detail.toPlainText()
    assert text.startswith("JobStatusEvent  (rpc, tell)")
    assert '"new": "RUNNING"' in text
    assert "from taskmanager-1 to jobmaster-1" in payload_text(traffic(0))


def test_the_bridge_hands_over_a_burst_of_traffic_in_a_few_batches(qtbot):
    bridge = ClusterBridge()
    batches: list[int] = []
    bridge.traffic.connect(lambda records: batches.append(len(records)))
    producer = threading.Thread(target=lambda: [bridge.post_traffic(traffic(n))
                                                for n in range(3000)])
    producer.start()
    producer.join()
    qtbot.waitUntil(lambda: sum(batches) == 3000, timeout=2000)
    assert len(batches) <= 3
    bridge.close()


def test_the_bridge_keeps_the_size_not_the_payload_of_a_large_message(qtbot):
    bridge = ClusterBridge()
    received: list[Traffic] = []
    bridge.traffic.connect(received.extend)
    bridge.post_traffic(traffic(0, message="x", size=TRAFFIC_PAYLOAD_LIMIT + 1))
    qtbot.waitUntil(lambda: bool(received), timeout=2000)
    assert received[0].message is None
    assert received[0].size == TRAFFIC_PAYLOAD_LIMIT + 1
    assert "not kept" in received[0].error
    bridge.close()


def test_a_busy_control_plane_reaches_the_table_a_few_times_a_second(qtbot):
    view = MessagesView()
    qtbot.addWidget(view)
    inserts: list[int] = []
    view.model.rowsInserted.connect(lambda _parent, first, last: inserts.append(last - first + 1))
    for n in range(20):
        view.add([traffic(n)])
    assert view.model.rowCount() == 1, "the first message after a quiet spell shows at once"
    qtbot.waitUntil(lambda: view.model.rowCount() == 20, timeout=2000)
    assert inserts == [1, 19]
