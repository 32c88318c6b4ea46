"""A slot's thread runs the tasks handed to it in order, reuses itself only after a task
that made no Spark call and finished, skips a task the main thread ended first, and an
interrupt meant for one task never reaches the next."""

from __future__ import annotations

import itertools
import threading
import time

from clusterdeck.core.taskmanager.slotworkers import SlotWorker
from clusterdeck.core.taskmanager.tasks import TaskCanceled


class FakeTask:
    def __init__(self, name: str, ran: list, retire: bool = False,
                 body=lambda: None) -> None:
        self.name = name
        self.ran = ran
        self.retire_thread = retire
        self.body = body
        self.worker = None
        self.done = threading.Event()
        self.outcome = ""
        self._claims = itertools.count()

    def claim(self) -> bool:
        return next(self._claims) == 0

    def run_here(self) -> None:
        try:
            self.body()
            self.outcome = "finished"
        except TaskCanceled:
            self.outcome = "canceled"
        self.ran.append((self.name, threading.get_ident(), threading.current_thread().name))
        self.done.set()


def wait(task: FakeTask) -> None:
    assert task.done.wait(10.0), f"{task.name} never ran"


def test_tasks_run_in_order_on_one_thread_until_one_used_spark() -> None:
    ran: list = []
    worker = SlotWorker(0)
    tasks = [FakeTask("a", ran), FakeTask("b", ran, retire=True), FakeTask("c", ran)]
    for task in tasks:
        worker.hand(task)
    wait(tasks[2])
    assert [name for name, _, _ in ran] == ["a", "b", "c"]
    assert ran[0][1] == ran[1][1]       # a's thread ran b
    assert ran[2][1] != ran[1][1]       # b used Spark: c runs on a fresh thread
    worker.stop()


def test_a_task_the_main_thread_ended_first_is_skipped() -> None:
    ran: list = []
    worker = SlotWorker(0)
    gate = threading.Event()
    holder = FakeTask("holder", ran, body=lambda: gate.wait(10.0))
    cancelled, following = FakeTask("cancelled", ran), FakeTask("following", ran)
    for task in (holder, cancelled, following):
        worker.hand(task)
    assert cancelled.claim()  # the main thread ends it before its turn
    gate.set()
    wait(following)
    assert [name for name, _, _ in ran] == ["holder", "following"]
    worker.stop()


def test_an_interrupt_ends_its_task_and_the_thread_is_not_reused() -> None:
    ran: list = []
    worker = SlotWorker(0)
    started = threading.Event()

    def stuck() -> None:
        started.set()
        while True:  # user code that ignores its cancel
            time.sleep(0.01)

    hung, following = FakeTask("hung", ran, body=stuck), FakeTask("following", ran)
    worker.hand(hung)
    worker.hand(following)
    assert started.wait(10.0)
    # What Task.interrupt does: retire first, then raise in the thread if still there.
    import ctypes
    worker.retire = True
    assert worker.current is hung
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                               ctypes.py_object(TaskCanceled))
    wait(following)
    assert hung.outcome == "canceled" and following.outcome == "finished"
    assert ran[0][1] != ran[1][1]
    worker.stop()
