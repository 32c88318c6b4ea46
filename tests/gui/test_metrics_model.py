"""The live numbers as the graph and the plots take them (gui/models/metrics.py)."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import pytest

from clusterdeck.core.protocol import messages as p
from clusterdeck.gui.models.formatting import format_watermark
from clusterdeck.gui.models.metrics import (
    HISTORY,
    MAX_JOBS,
    MetricsStore,
    backpressure_band,
)
from tests.gui import overviews


def numbers(subtask: int, records_in: int, records_out: int, busy: float = 0.0, *,
            attempt: int = 0, final: bool = False, job: str = "job-1",
            vertex: str = "vertex-1") -> p.AttemptMetrics:
    attempt_id = f"{job}/{vertex}/{subtask}/{attempt}"
    return p.AttemptMetrics(job, vertex, subtask, attempt, attempt_id, records_in,
                            records_out, records_in * 10, records_out * 10, busy, final)


def at(time: float, *attempts: p.AttemptMetrics, heap: int = -1) -> p.TaskManagerMetrics:
    return p.TaskManagerMetrics("taskmanager-1", time, attempts, heap, 1 << 30)


def test_totals_add_subtasks_and_rates_follow_the_last_seconds():
    store = MetricsStore()
    store.set_parallelism("job-1", {"vertex-1": 2})
    store.add([at(100.0, numbers(0, 0, 0, 0.0), numbers(1, 0, 0, 0.0))])
    store.add([at(101.0, numbers(0, 500, 50, 1.0), numbers(1, 300, 30, 1.0))])
    store.add([at(102.0, numbers(0, 1000, 100, 2.0), numbers(1, 600, 60, 2.0))])

    vertex = store.vertices("job-1", now=102.5)["vertex-1"]

    assert (vertex.records_in, vertex.records_out, vertex.bytes_in) == (1600, 160, 16000)
    assert vertex.rate_in == pytest.approx(800.0)   # 1,600 records over 2 s
    assert vertex.busy_share == pytest.approx(1.0)  # both subtasks ran all the time
    assert vertex.spread == (60, 80, 100, 0)
    assert store.vertices("job-1", now=200.0)["vertex-1"].rate_in == 0  # nothing heard since
    assert store.vertices("job-1")["vertex-1"].rate_in == pytest.approx(800.0)  # a recording


def test_a_taskmanager_whose_clock_is_30_s_behind_has_live_rates_at_its_measured_offset():
    """Its messages' times are its own clock's; the ResourceManager measured the offset
    (the cluster overview's clock_offset_s), and the numbers go onto this time line."""
    store = MetricsStore()
    behind = replace(overviews.taskmanager("taskmanager-1"), clock_offset_s=-30.0)
    store.set_clock_offsets(overviews.overview(behind))
    store.add([at(70.0, numbers(0, 0, 0)), at(71.0, numbers(0, 500, 50))])

    assert store.vertices("job-1", now=101.2)["vertex-1"].rate_in == pytest.approx(500.0)
    unmeasured = MetricsStore()
    unmeasured.add([at(70.0, numbers(0, 0, 0)), at(71.0, numbers(0, 500, 50))])
    assert unmeasured.vertices("job-1", now=101.2)["vertex-1"].rate_in == 0  # stale


def test_a_subtask_counts_by_its_current_attempt_and_final_numbers_stay():
    store = MetricsStore()
    store.add([at(1.0, numbers(0, 70, 7, attempt=0, final=True))])   # failed half-way
    store.add([at(2.0, numbers(0, 100, 10, attempt=1))])
    store.add([at(2.5, numbers(0, 90, 9, attempt=0))])                # late, older attempt
    assert store.vertices("job-1")["vertex-1"].records_in == 100
    store.add([at(3.0, numbers(0, 120, 12, attempt=1, final=True))])
    store.add([at(3.1, numbers(0, 110, 11, attempt=1))])              # sent before the end
    assert store.vertices("job-1")["vertex-1"].records_out == 12


def test_history_and_jobs_are_bounded_and_the_heap_is_kept_per_taskmanager():
    store = MetricsStore()
    for second in range(HISTORY + 10):
        store.add([at(float(second), numbers(0, second, second), heap=second)])
    rates = store.rates("job-1", "vertex-1")
    assert HISTORY // 2 < len(rates) <= HISTORY
    assert rates[0][0] == 0.0 and rates[-1][0] == HISTORY + 9  # the whole life, thinned
    heap = store.processes["taskmanager-1"].heap
    assert len(heap) <= HISTORY and heap[0][0] == 0.0
    for index in range(MAX_JOBS + 5):
        store.add([at(1.0, numbers(0, 1, 1, job=f"job-{index + 2}"))])
    assert store.vertices("job-1") == {}  # the oldest forgotten first
    assert store.vertices(f"job-{MAX_JOBS + 6}") != {}


def test_a_taskmanager_cannot_make_the_window_hold_without_bound(monkeypatch):
    from clusterdeck.gui.models import metrics
    monkeypatch.setattr(metrics, "MAX_VERTICES", 5)
    store = MetricsStore()
    store.add([at(1.0, *(numbers(0, 1, 1, vertex=f"v{i}") for i in range(50)))])
    store.add([at(2.0, numbers(-3, 1, 1), numbers(10**9, 1, 1))])
    vertices = store.vertices("job-1")
    assert len(vertices) == 5
    assert all(n.subtasks == 1 for n in vertices.values())


def test_only_a_web_address_opens_as_a_spark_ui(qtbot, monkeypatch):
    from clusterdeck.gui.bridge import ClusterBridge
    from clusterdeck.gui.controllers import inspection
    opened, notices = [], []
    monkeypatch.setattr(inspection.QDesktopServices, "openUrl",
                        lambda url: opened.append(url.toString()) or True)
    inspector = inspection.ProcessInspector(ClusterBridge())
    inspector.notice.connect(notices.append)
    for url in ("file:///etc/passwd", "javascript:alert(1)", "http://127.0.0.1:4040"):
        inspector.open_spark_ui("taskmanager-1", url)
    assert opened == ["http://127.0.0.1:4040"]
    assert sum("not a web address" in n for n in notices) == 2


def streaming(subtask: int, backpressured: float, watermark: float | None = None, *,
              end: bool = False, attempt: int = 0, final: bool = False,
              vertex: str = "vertex-1") -> p.AttemptMetrics:
    return replace(numbers(subtask, 0, 0, attempt=attempt, final=final, vertex=vertex),
                   backpressured=backpressured, watermark=watermark, watermark_end=end)


def test_backpressure_is_the_highest_share_of_a_subtask_over_the_last_seconds():
    store = MetricsStore()
    for second in range(4):  # subtask 0 waits 0.8 s of each second, subtask 1 0.05 s
        store.add([at(100.0 + second, streaming(0, 0.8 * second),
                      streaming(1, 0.05 * second))])

    vertex = store.vertices("job-1", now=103.5)["vertex-1"]

    assert vertex.backpressure == pytest.approx(0.8)
    assert (vertex.backpressure_band, vertex.backpressured_subtask) == ("HIGH", 0)
    store.add([at(104.0, streaming(0, 2.4), streaming(1, 0.2))])  # 0 waited no more
    store.add([at(107.0, streaming(0, 2.4), streaming(1, 0.2))])
    assert store.vertices("job-1", now=107.0)["vertex-1"].backpressure == 0.0
    assert store.vertices("job-1", now=200.0)["vertex-1"].backpressure == 0.0  # silent


def test_a_wait_counted_at_its_end_fills_a_window_at_most():
    store = MetricsStore()
    store.add([at(10.0, streaming(0, 0.0))])
    store.add([at(11.0, streaming(0, 7.0))])  # one emit waited 7 s, counted as it ended
    assert store.vertices("job-1", now=11.0)["vertex-1"].backpressure == 1.0


def test_a_new_attempt_starts_its_backpressure_afresh_and_an_ended_one_has_none():
    store = MetricsStore()
    store.add([at(1.0, streaming(0, 0.0))])
    store.add([at(2.0, streaming(0, 0.4))])
    store.add([at(3.0, streaming(0, 0.0, attempt=1))])  # after a failover: total from 0
    store.add([at(4.0, streaming(0, 0.2, attempt=1))])
    assert store.vertices("job-1", now=4.0)["vertex-1"].backpressure == pytest.approx(0.2)
    store.add([at(5.0, streaming(0, 1.2, attempt=1, final=True))])
    assert store.vertices("job-1", now=5.0)["vertex-1"].backpressure == 0.0


@pytest.mark.parametrize(("share", "band"), [(0.0, "OK"), (0.10, "OK"), (0.11, "LOW"),
                                             (0.50, "LOW"), (0.51, "HIGH"), (1.0, "HIGH")])
def test_backpressure_falls_into_flinks_bands(share, band):
    assert backpressure_band(share) == band


def test_a_vertexs_watermark_is_the_smallest_of_its_subtasks_and_none_while_one_has_none():
    store = MetricsStore()
    store.add([at(1.0, streaming(0, 0.0, 12.5), streaming(1, 0.0, None))])
    assert store.vertices("job-1")["vertex-1"].watermark is None
    store.add([at(2.0, streaming(0, 0.0, 14.0), streaming(1, 0.0, 13.25))])
    assert store.vertices("job-1")["vertex-1"].watermark == 13.25
    store.add([at(3.0, streaming(0, 0.0, end=True), streaming(1, 0.0, end=True))])
    assert store.vertices("job-1")["vertex-1"].watermark == math.inf


def test_impossible_streaming_numbers_are_dropped():
    store = MetricsStore()
    store.add([at(1.0, streaming(0, -1.0), streaming(1, 0.0, 5.0, end=True))])
    assert store.vertices("job-1") == {}


def test_a_watermark_reads_as_event_time():
    assert format_watermark(None) == "no watermark"
    assert format_watermark(math.inf) == "end of event time"
    assert format_watermark(1234.5) == "1,234.500 s"
    assert format_watermark(time.time()).count(":") == 2  # a time of day, today
    assert format_watermark(1.0e9).startswith("2001-09-")  # another day: with its date
