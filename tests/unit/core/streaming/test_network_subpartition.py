"""A result subpartition without sockets: credit gates the data, never the events; a full
queue makes the emitter wait, and it never waits for ever."""

from __future__ import annotations

import threading
import time

import pytest

from clusterdeck.core.streaming.network.errors import (
    ChannelCancelled,
    ChannelError,
    ChannelTimeout,
)
from clusterdeck.core.streaming.network.subpartition import (
    EVENT_CAPACITY,
    BufferKind,
    ResultSubpartition,
)
from clusterdeck.core.streaming.network.writer import ResultPartitionWriter

DATA, EVENT, END = BufferKind.DATA, BufferKind.EVENT, BufferKind.END_OF_PARTITION


class Reader:
    """Stands for the connection: counts the wake-ups and remembers the abort."""

    def __init__(self) -> None:
        self.wakes = 0
        self.aborted: ChannelError | None = None

    def wake(self) -> None:
        self.wakes += 1

    def abort(self, error: ChannelError) -> None:
        self.aborted = error


def never() -> bool:
    return False


def soon(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


def attached(capacity: int = 3) -> tuple[ResultSubpartition, Reader]:
    subpartition = ResultSubpartition("p", 0, capacity)
    reader = Reader()
    subpartition.attach(reader)
    return subpartition, reader


def test_data_waits_for_credit_and_each_buffer_uses_one() -> None:
    subpartition, _ = attached()
    subpartition.add(DATA, b"a", soon(), never)
    subpartition.add(DATA, b"b", soon(), never)
    assert subpartition.take_sendable() is None
    subpartition.add_credit(1)
    assert subpartition.take_sendable() == (DATA, b"a")
    assert subpartition.take_sendable() is None


def test_an_event_needs_no_credit_but_waits_behind_the_data_before_it() -> None:
    subpartition, _ = attached()
    subpartition.add(DATA, b"a", soon(), never)
    subpartition.add(EVENT, b"barrier", soon(), never)
    assert subpartition.take_sendable() is None  # the event never overtakes "a"
    subpartition.add_credit(1)
    assert subpartition.take_sendable() == (DATA, b"a")
    assert subpartition.take_sendable() == (EVENT, b"barrier")


def test_the_reader_is_woken_only_when_it_starved_and_something_became_sendable() -> None:
    subpartition, reader = attached()
    assert subpartition.take_sendable() is None  # starved
    subpartition.add(DATA, b"a", soon(), never)  # no credit: nothing sendable yet
    assert reader.wakes == 0
    subpartition.add(EVENT, b"e", soon(), never)  # behind "a": still nothing
    assert reader.wakes == 0
    subpartition.add_credit(5)
    assert subpartition.take_sendable() == (DATA, b"a")
    assert subpartition.take_sendable() == (EVENT, b"e")
    assert subpartition.take_sendable() is None
    subpartition.add(DATA, b"b", soon(), never)
    subpartition.add(DATA, b"c", soon(), never)
    assert reader.wakes == 1  # once for the first; the reader takes both


def test_a_full_subpartition_times_out_the_emitter() -> None:
    subpartition, _ = attached(capacity=2)
    subpartition.add(DATA, b"a", soon(), never)
    subpartition.add(DATA, b"b", soon(), never)
    with pytest.raises(ChannelTimeout, match="subpartition 0 of partition p"):
        subpartition.add(DATA, b"c", soon(0.1), never)


def test_a_waiting_emitter_goes_on_when_the_reader_takes_a_buffer() -> None:
    subpartition, _ = attached(capacity=1)
    subpartition.add(DATA, b"a", soon(), never)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (subpartition.add(DATA, b"b", soon(), never),
                                              done.set()), daemon=True)
    thread.start()
    assert not done.wait(0.05)
    subpartition.add_credit(1)
    assert subpartition.take_sendable() == (DATA, b"a")
    assert done.wait(5.0)
    thread.join(5.0)


def test_a_cancelled_task_stops_waiting() -> None:
    subpartition, _ = attached(capacity=1)
    subpartition.add(DATA, b"a", soon(), never)
    cancel = threading.Event()
    errors: list[BaseException] = []

    def emit() -> None:
        try:
            subpartition.add(DATA, b"b", soon(30.0), cancel.is_set)
        except ChannelError as error:
            errors.append(error)
    thread = threading.Thread(target=emit, daemon=True)
    thread.start()
    cancel.set()
    thread.join(5.0)
    assert len(errors) == 1 and isinstance(errors[0], ChannelCancelled)


def test_a_failure_wakes_the_emitter_drops_the_queue_and_tells_the_reader() -> None:
    subpartition, reader = attached(capacity=1)
    subpartition.add(DATA, b"a", soon(), never)
    errors: list[BaseException] = []

    def emit() -> None:
        try:
            subpartition.add(DATA, b"b", soon(30.0), never)
        except ChannelError as error:
            errors.append(error)
    thread = threading.Thread(target=emit, daemon=True)
    thread.start()
    subpartition.fail(ChannelError("the consumer went away"))
    thread.join(5.0)
    assert [str(e) for e in errors] == ["the consumer went away"]
    assert subpartition.queued() == 0
    assert reader.aborted is not None
    with pytest.raises(ChannelError, match="went away"):
        subpartition.add(EVENT, b"e", soon(), never)


def test_events_are_bounded_too() -> None:
    subpartition, _ = attached()
    for _ in range(EVENT_CAPACITY):
        subpartition.add(EVENT, b"e", soon(), never)
    with pytest.raises(ChannelTimeout):
        subpartition.add(EVENT, b"e", soon(0.05), never)


def test_nothing_can_follow_the_end_of_partition() -> None:
    subpartition, _ = attached()
    subpartition.add(END, b"", soon(), never)
    with pytest.raises(ChannelError, match="has ended"):
        subpartition.add(DATA, b"late", soon(), never)


def test_a_subpartition_is_read_by_one_consumer() -> None:
    subpartition, _ = attached()
    with pytest.raises(ChannelError, match="already being consumed"):
        subpartition.attach(Reader())


def test_the_writer_refuses_a_buffer_over_its_size_at_once() -> None:
    writer = ResultPartitionWriter("p", 2, max_buffer_size=10)
    with pytest.raises(ValueError, match="11 bytes for partition p: at most 10"):
        writer.emit(0, b"x" * 11)


def test_one_failed_subpartition_fails_the_whole_partition_once() -> None:
    done: list[ResultPartitionWriter] = []
    writer = ResultPartitionWriter("p", 3, on_done=done.append)
    writer.fail(ChannelError("consumer 1 went away"))
    writer.fail(ChannelError("a second failure"))
    with pytest.raises(ChannelError, match="consumer 1 went away"):
        writer.emit(2, b"x", timeout=1.0)
    assert done == [writer]
    assert str(writer.failure) == "consumer 1 went away"
