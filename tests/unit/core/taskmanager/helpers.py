"""A TaskExecutor stand-in for the TaskManager's collaborators (core/taskmanager/endpoint.py):
its mailbox, timers and workers run only when a test says so, and its gateways record."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind
from clusterdeck.core.rpc import ScheduledCall


def deployment(attempt_id: str = "job/v#0/a0", slot_index: int = 0,
               task_timeout: float = 0.0) -> p.SubmitTask:
    return p.SubmitTask("job", JobGraph("j", JobKind.DATAFLOW, ()), attempt_id, "v", 0, 1, 0,
                        slot_index, "alloc", "jobmaster.job", "token", "sha", "/work",
                        task_timeout=task_timeout)


class RecordingGateway:
    """Any ask or tell: recorded with the Future of its answer, which the test completes."""

    def __init__(self, target: str, token: str | None) -> None:
        self.target = target
        self.token = token
        self.calls: list[tuple[str, Any, Future[Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., Future[Any]]:
        def call(message: Any, *_args: Any) -> Future[Any]:
            answer: Future[Any] = Future()
            self.calls.append((name, message, answer))
            return answer
        return call


class FakeService:
    def __init__(self) -> None:
        self.gateways: dict[tuple[str, str | None], RecordingGateway] = {}
        self.published: list[tuple[str, Any]] = []

    def gateway(self, _kind: type, target: str, token: str | None = None) -> RecordingGateway:
        return self.gateways.setdefault((target, token), RecordingGateway(target, token))

    def publish(self, topic: str, message: Any, qos: int = 1) -> None:
        self.published.append((topic, message))

    def calls(self) -> list[tuple[str, Any, Future[Any]]]:
        return [call for gateway in self.gateways.values() for call in gateway.calls]


class FakeEndpoint:
    endpoint_id = "taskexecutor.tm-1"

    def __init__(self) -> None:
        self.rpc_service = FakeService()
        self.mailbox: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.timers: list[tuple[float, Callable[..., Any], tuple[Any, ...]]] = []
        self.workers: list[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]] = []

    def run_async(self, fn: Callable[..., Any], *args: Any) -> None:
        self.mailbox.append((fn, args))

    def schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> ScheduledCall:
        self.timers.append((delay, fn, args))
        return ScheduledCall(delay, lambda: None)

    def on_main_thread(self, future: Future[Any],
                       callback: Callable[[Any, BaseException | None], None]) -> None:
        def done(f: Future[Any]) -> None:
            error = f.exception()
            self.run_async(callback, None if error else f.result(), error)
        future.add_done_callback(done)

    def run_in_worker(self, fn: Callable[..., Any], *args: Any,
                      name: str = "worker") -> Future[Any]:
        future: Future[Any] = Future()
        self.workers.append((fn, args, future))
        return future

    def drain(self) -> None:
        """Run the mailbox until it is empty, as the main thread would."""
        while self.mailbox:
            fn, args = self.mailbox.pop(0)
            fn(*args)

    def fire_timers(self) -> list[float]:
        """Run every timer due so far, then the mailbox; their delays."""
        timers, self.timers = self.timers, []
        for _delay, fn, args in timers:
            fn(*args)
        self.drain()
        return [delay for delay, _fn, _args in timers]
