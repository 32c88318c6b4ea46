"""The recorder: hands what the broker carries and what the processes log to the store.

paho's network thread only appends (topic, payload, time) to a bounded queue; one
writer thread drains it with the new log lines every ``FLUSH_INTERVAL`` into one
transaction, and applies the retention now and then. A queue that overflows (the disk
fell behind) is never silent: the writer records how many messages it lost, as a line
of the recorder's own in the recording's log.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time

from clusterdeck.core.recorder.logtail import LogTail
from clusterdeck.core.recorder.sampler import ProcessSampler
from clusterdeck.core.recorder.store import LogLine, Message, RecordingStore, Sample

log = logging.getLogger(__name__)

FLUSH_INTERVAL = 0.25  # seconds between two transactions
SAMPLE_INTERVAL = 1.0  # seconds between two samples of the processes' CPU and memory
PRUNE_INTERVAL = 10.0  # seconds between two retention passes (and saved log positions)
QUEUE_LIMIT = 100_000  # messages waiting for the writer; past it they are counted lost
POSITIONS_KEY = "log-positions"


class Recorder:
    def __init__(self, store: RecordingStore, tail: LogTail,
                 sampler: ProcessSampler | None = None) -> None:
        self.store = store
        self.tail = tail
        self.sampler = sampler or ProcessSampler()
        self._last_sample = 0.0
        self._queue: queue.Queue[Message] = queue.Queue(QUEUE_LIMIT)
        # Only ever incremented, on paho's thread; the writer reports what grew since it
        # last looked. A read-and-reset there would lose counts that race with it.
        self._lost = 0
        self._lost_reported = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recorder-writer",
                                        daemon=True)
        self._last_prune = 0.0

    def received(self, topic: str, payload: bytes) -> None:
        """paho's network thread: queue and return."""
        try:
            self._queue.put_nowait(Message(time.time(), topic, payload))
        except queue.Full:
            self._lost += 1

    def start(self) -> None:
        self._thread.start()

    @property
    def writing(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued, save the log positions, close the store."""
        self._stop.set()
        self._thread.join(timeout)

    def flush(self) -> int:
        """One transaction of what arrived since the last; rows written."""
        messages = self._drain()
        lines = self.tail.poll()
        counted = self._lost
        lost, self._lost_reported = counted - self._lost_reported, counted
        if lost:
            lines.append(LogLine(time.time(), "recorder", f"[recorder] {lost} messages were "
                                 "not recorded: the writer fell behind"))
            log.warning("%d messages were not recorded: the writer fell behind", lost)
        for message in messages:
            self.sampler.saw(message)
        samples = self._samples_due()
        if messages or lines or samples:
            self.store.add(messages, lines, samples)
        return len(messages) + len(lines) + len(samples)

    def _samples_due(self) -> list[Sample]:
        now = time.monotonic()
        if now - self._last_sample < SAMPLE_INTERVAL:
            return []
        self._last_sample = now
        return self.sampler.sample(time.time())

    def _drain(self) -> list[Message]:
        messages: list[Message] = []
        while True:
            try:
                messages.append(self._queue.get_nowait())
            except queue.Empty:
                return messages

    def _run(self) -> None:
        try:
            while not self._stop.wait(FLUSH_INTERVAL):
                self._step()
            self.flush()
            self._save_positions()
        except Exception:
            # The process must not look alive while it records nothing: main() sees the
            # thread gone and exits, its supervisor restarts it, and the log says why.
            log.critical("the recorder's writer failed", exc_info=True)
        finally:
            self.tail.close()
            self.store.close()

    def _step(self) -> None:
        self.flush()
        now = time.monotonic()
        if now - self._last_prune >= PRUNE_INTERVAL:
            self._last_prune = now
            self.store.prune()
            self._save_positions()

    def _save_positions(self) -> None:
        self.store.note(POSITIONS_KEY, json.dumps(self.tail.positions()))


def saved_positions(text: str | None) -> dict[str, tuple[int, int]]:
    """The log positions a previous recorder saved (nothing when unreadable)."""
    try:
        return {str(k): (int(v[0]), int(v[1])) for k, v in json.loads(text or "{}").items()}
    except (ValueError, TypeError, IndexError, AttributeError):
        return {}
