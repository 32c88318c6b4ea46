"""The long-lived thread of a slot: it runs the tasks handed to it one after the other.

A thread per attempt cost a short task a thread start (the main thread waits until the
new thread runs) and a turn of the main thread's mailbox between two tasks of a slot.
Now the TaskExecutor hands a slot's task to its worker when it deploys it, also when it
is deployed ahead behind the slot's running task, and the worker starts the next the
moment the one before ends. The main thread still keeps the slot's holder and queue; it
learns of the switch from the ended task's outcome, as before.

A thread that ran Spark work is not reused: PySpark pins each Python thread to a JVM
thread, whose local properties (a job group, a scheduler pool a script set) would carry
over to the next attempt. The worker then goes on in a fresh thread, as it does after a
task that failed, was cancelled or interrupted (``Task.retire_thread``, ``retire``).
Tasks are claimed once (``Task.claim``): a task cancelled before its turn is ended by
the main thread instead, and the worker skips it.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterdeck.core.taskmanager.tasks import Task


class SlotWorker:
    def __init__(self, slot_index: int) -> None:
        self.slot_index = slot_index
        self.current: Task | None = None  # the task running on the thread now
        self.retire = False  # set by the main thread: no further task on this thread
        self._tasks: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def hand(self, task: Task) -> None:
        """Main thread: run ``task`` after those handed before."""
        task.worker = self
        self._tasks.put(task)
        if self._thread is None:
            self._spawn()

    def stop(self) -> None:
        self._tasks.put(None)

    @property
    def ident(self) -> int | None:
        thread = self._thread
        return thread.ident if thread is not None else None

    def _spawn(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self._idle_name(),
                                        daemon=True)
        self._thread.start()

    def _idle_name(self) -> str:
        return f"slot-{self.slot_index}"

    def _loop(self) -> None:
        from clusterdeck.core.taskmanager.tasks import TaskCanceled
        try:
            while True:
                task = self._tasks.get()
                if task is None:
                    return
                if not task.claim():
                    continue  # the main thread ended it before its turn
                self.current = task
                try:
                    task.run_here()
                finally:
                    self.current = None  # before reading ``retire``: see Task.interrupt
                    threading.current_thread().name = self._idle_name()
                if self.retire or task.retire_thread:
                    break
        except TaskCanceled:  # an interrupt that came as its task ended
            pass
        self.retire = False
        self._spawn()  # the slot goes on in a fresh thread
