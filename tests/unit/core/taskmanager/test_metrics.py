"""The live numbers a TaskManager publishes (core/taskmanager/metrics.py)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from clusterdeck.core.engine.tally import LiveCounts, Tally
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import ExecutionState
from clusterdeck.core.rpc import CodecError, Envelope, decode, encode
from clusterdeck.core.taskmanager.metrics import TaskMetrics
from clusterdeck.core.taskmanager.tasks import TaskOutcome

FRAME = 256 * 1024


def task(attempt_id: str, subtask: int = 0) -> SimpleNamespace:
    deployment = SimpleNamespace(job_id="job-1", vertex_id="vertex-1", subtask=subtask,
                                 attempt=0)
    return SimpleNamespace(attempt_id=attempt_id, deployment=deployment, counts=LiveCounts())


class Accumulator:
    def __init__(self, value: int) -> None:
        self.value = value


def test_a_running_attempt_counts_its_done_batches_and_what_its_accumulators_hold():
    running = task("a-1")
    running.counts.records_in = 100
    running.counts.reading = (Tally(lambda: 0, Accumulator(40)), lambda: 10**9)
    metrics = TaskMetrics("taskmanager-1")
    metrics.began(running)

    [message] = metrics.messages([running])

    [numbers] = message.attempts
    assert (numbers.records_in, numbers.final, numbers.attempt_id) == (140, False, "a-1")
    assert message.heap_used == -1  # no JVM read yet


def test_an_ended_attempt_is_sent_once_with_its_results_records():
    ended = task("a-1")
    ended.counts.records_out = 5
    metrics = TaskMetrics("taskmanager-1")
    metrics.began(ended)
    metrics.ended(ended, TaskOutcome(ExecutionState.FINISHED, p.TaskResult(7, 9)))

    [first] = metrics.messages([])
    assert [(a.records_in, a.records_out, a.final) for a in first.attempts] == [(7, 9, True)]
    assert metrics.messages([]) == []  # idle, no heap known: nothing to say
    metrics.heap = (1 << 20, 1 << 30)
    [idle] = metrics.messages([])
    assert (idle.attempts, idle.heap_used, idle.heap_max) == ((), 1 << 20, 1 << 30)


def test_ended_attempts_go_alone_with_their_ends_and_only_once():
    running, ended = task("a-1"), task("a-2", subtask=1)
    metrics = TaskMetrics("taskmanager-1")
    metrics.began(running)
    metrics.began(ended)
    assert metrics.ended_messages() == []  # nothing ended: the tick says the rest
    metrics.ended(ended, TaskOutcome(ExecutionState.FAILED))

    [last] = metrics.ended_messages()
    assert [(a.attempt_id, a.final) for a in last.attempts] == [("a-2", True)]
    assert last.attempts[0].busy >= 0
    [tick] = metrics.messages([running])
    assert [a.attempt_id for a in tick.attempts] == ["a-1"]


def test_many_attempts_go_in_pieces_that_each_fit_a_frame():
    metrics = TaskMetrics("taskmanager-1")
    tasks = [task(f"attempt-{i:05d}-" + "x" * 40, subtask=i) for i in range(450)]
    for each in tasks:
        metrics.began(each)
        each.counts.bytes_in = 10**12

    messages = metrics.messages(tasks)

    assert [len(m.attempts) for m in messages] == [200, 200, 50]
    frames = [encode(Envelope("event", "taskmanager-1", m), FRAME) for m in messages]
    assert max(map(len, frames)) < FRAME / 3  # the default rpc.framesize, with room
    assert decode(frames[0], FRAME).message == messages[0]


def test_time_an_attempt_waited_for_work_is_not_busy_time():
    """A streaming task between its batches waits; that is not work."""
    waiting, working = task("a-1"), task("a-2", subtask=1)
    metrics = TaskMetrics("taskmanager-1")
    metrics.began(waiting)
    metrics.began(working)
    for attempt_id in ("a-1", "a-2"):  # both began a second ago
        metrics._began[attempt_id] -= 1.0
    waiting.counts.idle = 0.25
    [message] = metrics.messages([waiting, working])
    busy = {numbers.attempt_id: numbers.busy for numbers in message.attempts}
    assert busy["a-2"] >= 1.0 and abs((busy["a-2"] - busy["a-1"]) - 0.25) < 0.01
    waiting.counts.idle = 1000.0  # never below zero
    [message] = metrics.messages([waiting])
    assert message.attempts[0].busy == 0.0


def test_a_streaming_attempt_sends_its_backpressure_so_far_and_it_is_not_busy_time():
    """The total goes, as busy's does: the window takes the share of each second."""
    pressed = task("a-1")
    metrics = TaskMetrics("taskmanager-1")
    metrics.began(pressed)
    metrics._began["a-1"] -= 2.0  # began two seconds ago
    pressed.counts.idle, pressed.counts.consumers_waited = 0.25, lambda: 1.5

    [message] = metrics.messages([pressed])

    [numbers] = message.attempts
    assert numbers.backpressured == 1.5
    assert abs(numbers.busy - 0.25) < 0.01  # 2 s less 0.25 idle less 1.5 back-pressured


def test_the_watermark_goes_as_it_is_and_the_end_of_event_time_as_a_flag():
    stream = task("a-1")
    metrics = TaskMetrics("taskmanager-1")
    metrics.began(stream)
    sent = []
    for watermark in (None, 12.5, math.inf):
        stream.counts.watermark = watermark
        [message] = metrics.messages([stream])
        frame = encode(Envelope("event", "taskmanager-1", message), FRAME)
        [numbers] = decode(frame, FRAME).message.attempts
        sent.append((numbers.watermark, numbers.watermark_end))

    assert sent == [(None, False), (12.5, False), (None, True)]


def test_a_batch_attempt_has_no_backpressure_and_no_watermark():
    batch = task("a-1")
    metrics = TaskMetrics("taskmanager-1")
    metrics.began(batch)
    [message] = metrics.messages([batch])
    [numbers] = message.attempts
    assert (numbers.backpressured, numbers.watermark, numbers.watermark_end) == (
        0.0, None, False)


def attempt_frame(**fields: object) -> bytes:
    """A TaskManagerMetrics of one attempt as a sender writes it, with ``fields`` changed
    (None: left out, as a sender that predates them does)."""
    numbers = {"job_id": "job-1", "vertex_id": "vertex-1", "subtask": 0, "attempt": 0,
               "attempt_id": "a-1", "records_in": 1, "records_out": 2, "bytes_in": 3,
               "bytes_out": 4, "busy": 0.5, "final": False}
    numbers.update(fields)
    numbers = {name: value for name, value in numbers.items() if value is not None}
    return json.dumps({"v": 1, "kind": "event", "from": "taskmanager-1", "id": "",
                       "reply_to": "", "fencing": None, "type": "TaskManagerMetrics",
                       "body": {"taskmanager_id": "taskmanager-1", "time": 1.0,
                                "attempts": [numbers]},
                       "error": None}, separators=(",", ":")).encode()


def test_an_older_senders_attempt_metrics_decode_without_the_streaming_fields():
    [numbers] = decode(attempt_frame(), FRAME).message.attempts
    assert (numbers.records_out, numbers.backpressured, numbers.watermark,
            numbers.watermark_end) == (2, 0.0, None, False)
    [numbers] = decode(attempt_frame(backpressured=3, watermark=7, watermark_end=False),
                       FRAME).message.attempts
    assert (numbers.backpressured, numbers.watermark) == (3.0, 7.0)


@pytest.mark.parametrize(("fields", "complaint"), [
    ({"backpressured": "1.5"}, "backpressured: expected a number"),
    ({"backpressured": True}, "backpressured: expected a number"),
    ({"watermark": "inf"}, "watermark: expected a number"),
    ({"watermark_end": 1}, "watermark_end: expected a boolean"),
])
def test_malformed_streaming_fields_are_refused_on_receipt(fields, complaint):
    with pytest.raises(CodecError, match=complaint):
        decode(attempt_frame(**fields), FRAME)


def test_an_infinite_watermark_cannot_be_smuggled_in_as_a_number():
    frame = attempt_frame(watermark=1).replace(b'"watermark":1', b'"watermark":1e400')
    with pytest.raises(CodecError, match="malformed JSON: number is infinity"):
        decode(frame, FRAME)


def test_a_running_attempt_names_its_slot_thread_and_its_spark_worker_an_ended_one_none():
    running = task("a-1")
    running.counts.slot_thread = (4100, 4123)
    worker: list[int | None] = [None]
    running.counts.spark_worker = lambda: worker[0]
    metrics = TaskMetrics("taskmanager-1")
    metrics.began(running)

    [before] = metrics.messages([running])[0].attempts
    worker[0] = 4200  # the long-lived Spark task's worker connected
    [after] = metrics.messages([running])[0].attempts
    metrics.ended(running, TaskOutcome(ExecutionState.FINISHED, p.TaskResult(1, 1)))
    [ended] = metrics.messages([])[0].attempts

    assert before.workers == (p.AttemptWorker(4100, 4123),)
    assert after.workers == (p.AttemptWorker(4100, 4123), p.AttemptWorker(4200, 0))
    assert ended.workers == ()


def test_attempts_with_their_workers_still_fit_a_frame():
    metrics = TaskMetrics("taskmanager-1")
    tasks = [task(f"attempt-{i:05d}-" + "x" * 40, subtask=i) for i in range(200)]
    for each in tasks:
        metrics.began(each)
        each.counts.slot_thread = (4_194_304, 4_194_304)
        each.counts.spark_worker = lambda: 4_194_303

    [message] = metrics.messages(tasks)

    frame = encode(Envelope("event", "taskmanager-1", message), FRAME)
    assert len(frame) < FRAME / 2
    assert decode(frame, FRAME).message.attempts[0].workers[1] == p.AttemptWorker(4_194_303)


@pytest.mark.parametrize(("workers", "complaint"), [
    ([{"pid": "12"}], "workers\\[0\\].pid: expected a whole number"),
    ([{"pid": 12, "thread": 1.5}], "workers\\[0\\].thread: expected a whole number"),
    ({"pid": 12}, "workers"),
])
def test_malformed_workers_are_refused_on_receipt(workers, complaint):
    with pytest.raises(CodecError, match=complaint):
        decode(attempt_frame(workers=workers), FRAME)


def test_a_batch_attempt_names_the_pooled_spark_workers_running_its_records_now():
    batch, other = task("a-1"), task("a-2", subtask=1)
    batch.counts.slot_thread = (4100, 4123)
    metrics = TaskMetrics("taskmanager-1")
    for each in (batch, other):
        metrics.began(each)
    metrics.spark_workers = {"a-1": [4301, 4302], "gone": [4303]}

    first, second = metrics.messages([batch, other])[0].attempts

    assert first.workers == (p.AttemptWorker(4100, 4123), p.AttemptWorker(4301),
                             p.AttemptWorker(4302))
    assert second.workers == ()
