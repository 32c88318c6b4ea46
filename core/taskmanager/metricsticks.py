"""When a TaskManager's live numbers (metrics.py) go out, and its Spark JVM's heap is read.

Every ``INTERVAL`` while attempts run, every ``IDLE_INTERVAL`` else, the numbers go on
``metrics/<taskmanager-id>`` and the heap is read again, on one worker thread of its own
(one Py4J connection, not one per second). An ended attempt's last numbers go ahead of
its final state update (``publish_ended``), so whoever reads them when the job ends has
them.

Main thread of the TaskExecutor only (``Endpoint``), but for the heap reading.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clusterdeck.core.engine.workermarks import read_marks
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.taskmanager.endpoint import Endpoint
from clusterdeck.core.taskmanager.metrics import IDLE_INTERVAL, INTERVAL, TaskMetrics, jvm_numbers
from clusterdeck.core.taskmanager.tasks import Task, TaskOutcome


class MetricsTicks:
    """``running()``: the tasks running now; ``spark()``: the SparkSession once it is
    ready, else None."""

    def __init__(self, endpoint: Endpoint, resource_id: str,
                 running: Callable[[], Collection[Task]],
                 spark: Callable[[], Any | None], marks: Path | None = None) -> None:
        """``marks``: where its Spark's Python workers note whose records they run."""
        self._endpoint = endpoint
        self._marks = marks
        self._reading_marks = False
        self._resource_id = resource_id
        self._running = running
        self._spark = spark
        self.numbers = TaskMetrics(resource_id)
        self._reading_heap = False
        self._generation = 0
        self._idle = False
        # One thread for every heap reading: one Py4J connection, not one per second.
        self._heap_reader = ThreadPoolExecutor(1, thread_name_prefix="jvm-heap")

    def start(self) -> None:
        self._tick()

    def stop(self) -> None:
        self._heap_reader.shutdown(wait=False)

    def began(self, task: Task) -> None:
        self.numbers.began(task)
        if self._idle:  # the idle tick is seconds away: the first numbers go sooner
            self._tick()

    def ended(self, task: Task, outcome: TaskOutcome) -> None:
        self.numbers.ended(task, outcome)

    def publish_ended(self) -> None:
        """The last numbers of the attempts that ended since the last message, now."""
        self._publish(self.numbers.ended_messages())

    def _tick(self, generation: int | None = None) -> None:
        """The live numbers out, and the heap read again on a worker. Called without
        ``generation`` it starts a new chain of ticks; the older chain's next tick then
        does nothing."""
        if generation is None:
            self._generation += 1
        elif generation != self._generation:
            return
        self._publish(self.numbers.messages(self._running()))
        spark = self._spark()
        if not self._reading_heap and spark is not None:
            self._reading_heap = True
            reading = self._heap_reader.submit(jvm_numbers, spark)
            self._endpoint.on_main_thread(reading, self._heap_read)
        if self._marks is not None and not self._reading_marks and self.numbers.busy:
            self._reading_marks = True
            marks = self._heap_reader.submit(read_marks, self._marks)
            self._endpoint.on_main_thread(marks, self._marks_read)
        self._idle = not self.numbers.busy
        self._endpoint.schedule(IDLE_INTERVAL if self._idle else INTERVAL, self._tick,
                                self._generation)

    def _publish(self, messages: list[p.TaskManagerMetrics]) -> None:
        for message in messages:
            self._endpoint.rpc_service.publish(topics.metrics(self._resource_id), message,
                                               qos=0)

    def _marks_read(self, marks: dict[str, list[int]] | None,
                    error: BaseException | None) -> None:
        self._reading_marks = False
        self.numbers.spark_workers = marks if marks is not None and error is None else {}

    def _heap_read(self, numbers: tuple[int, int, str] | None,
                   error: BaseException | None) -> None:
        self._reading_heap = False
        # A JVM that does not answer shows as an unknown heap; its death is SparkHost's.
        if numbers is None or error is not None:
            self.numbers.heap = (-1, -1)
            return
        self.numbers.heap, self.numbers.spark_ui = (numbers[0], numbers[1]), numbers[2]
