"""The Python side of a streaming subtask's long-lived Spark task (continuous.py): what runs
inside the Spark Python worker, and the frames both sides exchange.

``serve`` is the ``mapPartitions`` function of a Spark job of one partition holding one
``WorkerSpec``: it connects back to its task over the Unix socket the spec names, proves
itself with the spec's token, then runs batch after batch until the task closes the
connection, and ends (so the Spark task ends, and its Python worker goes back to
Spark's pool). Each batch is a ``(partition function, items)`` pair, cloudpickled by the
task; the answer is a ``BatchOutcome`` (the function's results, the largest timestamp
its assigner gave, its counters' counts) or a ``BatchFailed`` with the user's traceback.

While it serves, the worker's collector runs after ``YOUNG_OBJECTS`` new container objects
rather than Python's 700: a column batch's rows are tens of thousands of tuples, each
batch set off dozens of collections (5-15% of the worker's time, docs/benchmarks.md
section 25), and nearly all of it is freed by reference counting as the batch ends.
Cyclic garbage still meets a collection after at most that many objects (memory stays
bounded), and the threshold before is restored when the worker goes back to Spark's pool.

Frames: a 4-byte big-endian length, then that many bytes. The first frame from the worker
is its token, sent raw, so the task unpickles nothing from a peer that did not prove
itself (the socket's folder is the task's user's alone besides).
"""

from __future__ import annotations

import gc
import os
import socket
import struct
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark import cloudpickle

from clusterdeck.core.engine.streamfunctions import BATCH, PartitionFunction

_LENGTH = struct.Struct(">I")
MAX_FRAME = 1 << 31  # bytes: a frame's length field holds at most 4 GiB; larger is refused
YOUNG_OBJECTS = 100_000
"""The collector's first threshold while a worker serves (module docstring): above a
column batch's 20,000 rows in and 20,000 out, so a batch sets off no collection."""


@dataclass(frozen=True)
class WorkerSpec:
    """Where the task listens and the token its worker proves itself with."""

    path: str
    token: bytes


@dataclass(frozen=True)
class Hello:
    """The worker's first pickled frame, after its token: its process id (what a test
    kills, and what a failure names)."""

    pid: int


@dataclass(frozen=True)
class BatchOutcome:
    results: list[Any]
    largest: float = float("-inf")
    counters: dict[str, int | float] = field(default_factory=dict)
    seconds: float = 0.0  # the function's own time in the worker, for the batch's pace


@dataclass(frozen=True)
class BatchFailed:
    """The user's function raised: its traceback as Python formats it, which failure_of
    reads as it reads a Spark PythonException's."""

    traceback: str


def run_batch(function: PartitionFunction, items: list[Any]) -> BatchOutcome:
    """One batch through ``function``, with what it saw besides its results."""
    BATCH.reset()
    started = time.perf_counter()
    results = list(function(iter(items)))
    return BatchOutcome(results, BATCH.largest, BATCH.counters,
                        time.perf_counter() - started)


class OneBatch:
    """A batch as one Spark job's ``mapPartitions`` function (continuous.py's fallback for
    a remote master): its only output is the batch's outcome."""

    def __init__(self, function: PartitionFunction) -> None:
        self.function = function

    def __call__(self, items: Iterator[Any]) -> Iterator[BatchOutcome]:
        yield run_batch(self.function, list(items))


def serve(specs: Iterator[WorkerSpec]) -> Iterator[int]:
    """The long-lived Spark task's body, in the Python worker: batches until the task
    closes the connection; yields the number of batches it ran."""
    spec = next(specs)
    batches = 0
    with fewer_collections(), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(spec.path)
        send_frame(connection, spec.token)
        send_frame(connection, cloudpickle.dumps(Hello(os.getpid())))
        while (frame := receive_frame(connection)) is not None:
            function, items = cloudpickle.loads(frame)
            try:
                answer: BatchOutcome | BatchFailed = run_batch(function, items)
            except Exception:  # the user's: it goes to the task, which fails with it
                answer = BatchFailed(traceback.format_exc())
            try:
                payload = cloudpickle.dumps(answer)
            except Exception:  # a result that cannot be pickled is the user's too
                payload = cloudpickle.dumps(BatchFailed(traceback.format_exc()))
            send_frame(connection, payload)
            batches += 1
    yield batches


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The collector's first threshold at ``YOUNG_OBJECTS`` inside, as it was after."""
    before = gc.get_threshold()
    young = before[0] and max(before[0], YOUNG_OBJECTS)  # 0: collection was off, stays so
    gc.set_threshold(young, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def send_frame(connection: socket.socket, payload: bytes) -> None:
    if len(payload) >= MAX_FRAME:
        raise ValueError(f"a batch frame of {len(payload)} bytes is larger than "
                         f"{MAX_FRAME} bytes")
    connection.sendall(_LENGTH.pack(len(payload)))
    connection.sendall(payload)


def receive_frame(connection: socket.socket) -> bytes | None:
    """The next frame; None when the peer closed the connection between two frames.
    A connection that ends inside a frame raises ConnectionError."""
    header = _receive_exactly(connection, _LENGTH.size, at_start=True)
    if header is None:
        return None
    (length,) = _LENGTH.unpack(header)
    payload = _receive_exactly(connection, length, at_start=False)
    assert payload is not None
    return payload


def _receive_exactly(connection: socket.socket, size: int, *, at_start: bool) -> bytes | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = connection.recv_into(view[received:])
        if count == 0:
            if at_start and received == 0:
                return None
            raise ConnectionError(f"the connection ended {received} bytes into a frame "
                                  f"of {size}")
        received += count
    return bytes(buffer)
