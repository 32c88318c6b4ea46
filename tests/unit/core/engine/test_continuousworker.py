"""The long-lived Spark task's protocol without Spark: ``serve`` run on a thread against a
listener as the task opens it, batches framed and answered in order, the user's
exception sent back as its traceback, counters counted per batch, the largest timestamp
reported, and the worker ending when its task closes the connection."""

from __future__ import annotations

import gc
import socket
import tempfile
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from pyspark import cloudpickle

from clusterdeck.core.engine.continuous import BatchCounters, socket_folder
from clusterdeck.core.engine.continuousworker import (
    YOUNG_OBJECTS,
    BatchFailed,
    Hello,
    WorkerSpec,
    receive_frame,
    run_batch,
    send_frame,
    serve,
)
from clusterdeck.core.engine.streamfunctions import (
    Chained,
    FilterElement,
    MapElement,
    Timestamped,
)
from clusterdeck.core.jobapi.counters import Counter

TOKEN = b"t" * 32


class Served:
    """``serve`` on a thread, connected to this end; ``ask`` sends a batch, ``answer``
    reads one."""

    def __init__(self, folder: Path) -> None:
        path = str(folder / "w.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(1)
        self.listener.settimeout(10)
        self.ended: Future[list[int]] = Future()
        self.threshold_before = gc.get_threshold()  # the collector's, before serve
        spec = WorkerSpec(path, TOKEN)
        threading.Thread(target=lambda: self.ended.set_result(list(serve(iter([spec])))),
                         daemon=True).start()
        self.connection, _ = self.listener.accept()
        self.connection.settimeout(10)

    def ask(self, function, items, scope: BatchCounters | None = None) -> None:
        if scope is None:
            payload = cloudpickle.dumps((function, items))
        else:
            with scope:
                payload = cloudpickle.dumps((function, items))
        send_frame(self.connection, payload)

    def answer(self):
        return cloudpickle.loads(receive_frame(self.connection))

    def close(self) -> None:
        self.connection.close()
        self.listener.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    worker = Served(tmp_path)
    try:
        yield worker
    finally:
        worker.close()


def test_the_worker_proves_itself_with_its_token_then_says_hello(served: Served):
    assert receive_frame(served.connection) == TOKEN
    hello = served.answer()
    assert isinstance(hello, Hello) and hello.pid > 0


def test_batches_are_answered_in_order_with_their_results(served: Served):
    receive_frame(served.connection), served.answer()
    doubled = Chained([MapElement(lambda record: record * 2), FilterElement(lambda r: r > 2)])
    served.ask(doubled, [(1.0, 1), (2.0, 2)])
    served.ask(doubled, [(3.0, 3)])
    assert served.answer().results == [(2.0, 4)]
    assert served.answer().results == [(3.0, 6)]


def test_a_users_exception_comes_back_as_its_traceback_and_the_worker_goes_on(served: Served):
    receive_frame(served.connection), served.answer()

    def broken(record):
        return record / 0

    served.ask(Chained([MapElement(broken)]), [(None, 1)])
    failed = served.answer()
    assert isinstance(failed, BatchFailed)
    assert "in broken" in failed.traceback and "ZeroDivisionError" in failed.traceback
    served.ask(Chained([]), [(None, 1)])
    assert served.answer().results == [(None, 1)]


def test_the_worker_ends_when_its_task_closes_the_connection(served: Served):
    receive_frame(served.connection), served.answer()
    served.ask(Chained([]), [(None, 1)])
    served.answer()
    served.connection.close()
    assert served.ended.result(timeout=10) == [1]


def test_counters_count_per_batch_and_add_up_per_attempt(served: Served):
    receive_frame(served.connection), served.answer()
    seen = Counter("seen")

    def counting(record):
        seen.add(2)
        return record

    scope = BatchCounters(("seen", "other"))
    for items in ([(None, 1), (None, 2)], [(None, 3)]):
        served.ask(Chained([MapElement(counting)]), items, scope)
        outcome = served.answer()
        assert outcome.counters == {"seen": 2 * len(items)}
        scope.counted(outcome)
    assert scope.values() == {"other": 0, "seen": 6}
    assert seen.value == 0   # the job's own Counter is never bound


def test_the_largest_timestamp_assigned_comes_back_with_the_batch():
    outcome = run_batch(Chained([Timestamped(lambda record: record[0])]),
                        [(None, (5, "a")), (None, (9, "b")), (None, (2, "c"))])
    assert (outcome.results, outcome.largest, outcome.counters) == (
        [(5.0, (5, "a")), (9.0, (9, "b")), (2.0, (2, "c"))], 9.0, {})
    assert outcome.seconds > 0
    assert run_batch(Chained([]), [(None, 1)]).largest == float("-inf")


def test_a_connection_that_ends_inside_a_frame_is_an_error_not_an_end():
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"\x00\x00\x00\x10abc")
        left.close()
        with pytest.raises(ConnectionError, match="3 bytes into a frame of 16"):
            receive_frame(right)


def test_the_sockets_folder_is_private_and_short_even_under_a_deep_temp_folder(
        tmp_path: Path, monkeypatch):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    folder = socket_folder()
    try:
        assert len(str(folder / "worker.sock")) <= 100
        assert folder.stat().st_mode & 0o777 == 0o700
    finally:
        folder.rmdir()


class Cycle:
    """An object in a reference cycle: freed only by the collector."""

    def __init__(self) -> None:
        self.me = self


def cyclic_garbage_left(items: Iterator[int]) -> list[tuple[int, int]]:
    """Makes ``3 * YOUNG_OBJECTS`` cycles, dropping each at once; how many are left
    uncollected, and the collector's first threshold while the batch ran."""
    alive: weakref.WeakSet[Cycle] = weakref.WeakSet()
    for _ in range(3 * next(items)):
        alive.add(Cycle())
    return [(len(alive), gc.get_threshold()[0])]


def test_the_worker_collects_less_often_while_it_serves_and_as_before_after(served: Served):
    receive_frame(served.connection), served.answer()
    served.ask(cyclic_garbage_left, [YOUNG_OBJECTS])
    ((left, threshold),) = served.answer().results
    assert threshold == YOUNG_OBJECTS
    assert left < 2 * YOUNG_OBJECTS  # cyclic garbage is still collected: memory bounded
    served.connection.close()
    served.ended.result(timeout=10)
    assert gc.get_threshold() == served.threshold_before
