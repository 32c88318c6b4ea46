"""The actor runtime on the in-process transport."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass

import pytest

from clusterdeck.core.rpc import (
    AskTimeoutError,
    FencedRpcEndpoint,
    FrameTooLargeError,
    Gateway,
    LocalRpcService,
    NotMainThreadError,
    RefusedMessageError,
    RemoteError,
    RpcEndpoint,
    ServiceClosedError,
    handler,
    message,
)
from tests.waiting import wait_for


@message
@dataclass(frozen=True)
class Append:
    sender: int
    sequence: int


@message
@dataclass(frozen=True)
class GetLog:
    pass


@message
@dataclass(frozen=True)
class LogContents:
    entries: tuple[tuple[int, int], ...]


@message
@dataclass(frozen=True)
class Explode:
    text: str


@message
@dataclass(frozen=True)
class Blob:
    data: str


class Recorder(RpcEndpoint):
    def __init__(self, endpoint_id: str = "recorder") -> None:
        super().__init__(endpoint_id)
        self.entries: list[tuple[int, int]] = []
        self.threads: set[str] = set()

    @handler(Append)
    def append(self, msg: Append) -> None:
        self.validate_main_thread()
        self.threads.add(threading.current_thread().name)
        self.entries.append((msg.sender, msg.sequence))

    @handler(GetLog)
    def get_log(self, msg: GetLog) -> LogContents:
        return LogContents(tuple(self.entries))

    @handler(Explode)
    def explode(self, msg: Explode) -> None:
        raise ValueError(msg.text)


class Silent(RpcEndpoint):
    @handler(GetLog)
    def never_answers(self, msg: GetLog) -> Future[LogContents]:
        return Future()


class Leader(FencedRpcEndpoint):
    @handler(GetLog)
    def get_log(self, msg: GetLog) -> LogContents:
        return LogContents(())

    @handler(Append, fenced=False)
    def open_call(self, msg: Append) -> LogContents:
        return LogContents(((msg.sender, msg.sequence),))


@pytest.fixture
def service():
    svc = LocalRpcService(ask_timeout=2.0, framesize=64 * 1024)
    yield svc
    svc.close()


def test_messages_from_concurrent_senders_keep_each_senders_fifo_order(service) -> None:
    recorder = service.start_endpoint(Recorder())
    gateway = service.gateway(Gateway, "recorder")
    senders = [threading.Thread(target=lambda s=s: [gateway.tell(Append(s, i))
                                                    for i in range(200)]) for s in range(4)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    log = gateway.ask(GetLog()).result(5).entries
    assert len(log) == 800
    for sender in range(4):
        assert [seq for s, seq in log if s == sender] == list(range(200))
    assert recorder.threads == {"endpoint-recorder"}


def test_validate_main_thread_raises_off_the_main_thread(service) -> None:
    recorder = service.start_endpoint(Recorder())
    with pytest.raises(NotMainThreadError, match="not from its main thread"):
        recorder.validate_main_thread()
    assert recorder.call_async(recorder.validate_main_thread).result(5) is None


def test_an_unanswered_ask_fails_with_a_timeout_naming_the_message(service) -> None:
    service.start_endpoint(Silent("silent"))
    future = service.gateway(Gateway, "silent").ask(GetLog(), timeout=0.2)
    with pytest.raises(AskTimeoutError, match=r"GetLog to silent got no answer within 0\.2 s"):
        future.result(5)


def test_an_ask_to_nobody_times_out(service) -> None:
    with pytest.raises(AskTimeoutError):
        service.gateway(Gateway, "nobody").ask(GetLog(), timeout=0.1).result(5)


def test_closing_a_service_fails_its_asks_in_flight_and_every_later_one() -> None:
    service = LocalRpcService(ask_timeout=600.0)
    in_flight = service.gateway(Gateway, "nobody").ask(GetLog())
    service.close()
    with pytest.raises(ServiceClosedError, match="GetLog to nobody got no answer before"):
        in_flight.result(5)   # not after the ask timeout of ten minutes
    with pytest.raises(ServiceClosedError, match="was not sent"):
        service.gateway(Gateway, "nobody").ask(GetLog()).result(5)


def test_an_exception_in_a_handler_reaches_the_caller_as_remote_error(service) -> None:
    service.start_endpoint(Recorder())
    with pytest.raises(RemoteError, match="ValueError: boom") as caught:
        service.gateway(Gateway, "recorder").ask(Explode("boom")).result(5)
    assert "raise ValueError" in caught.value.remote_traceback


class Strict(Recorder):
    """Refuses what its sender may not say; fails (here: records) on an error of its own."""

    def __init__(self) -> None:
        super().__init__("strict")
        self.unhandled: list[str] = []

    @handler(Blob)
    def refuse(self, msg: Blob) -> None:
        raise RefusedMessageError(f"no attempt {msg.data}")

    def on_unhandled_error(self, error: Exception, context: str) -> None:
        self.unhandled.append(f"{context}: {error}")


def test_a_refused_tell_is_dropped_and_fails_nothing_an_error_of_its_own_does(service) -> None:
    """A hostile or late tell (about another's attempt) must not fail what the receiver
    serves, as a bug of the receiver's own does; an ask hears the refusal."""
    strict = service.start_endpoint(Strict())
    gateway = service.gateway(Gateway, "strict")
    gateway.tell(Blob("a0"))
    gateway.tell(Explode("boom"))
    assert gateway.ask(GetLog()).result(5) == LogContents(())  # both handled by now
    assert strict.unhandled == ["handling Explode: boom"]
    with pytest.raises(RemoteError) as refused:
        gateway.ask(Blob("a1")).result(5)
    assert refused.value.type_name == "RefusedMessageError"


def test_a_stale_fencing_token_is_rejected(service) -> None:
    leader = service.start_endpoint(Leader("leader"))
    current = service.gateway(Gateway, "leader", leader.fencing_token)
    stale = service.gateway(Gateway, "leader", "an-earlier-leaders-token")
    assert current.ask(GetLog()).result(5) == LogContents(())
    with pytest.raises(RemoteError) as caught:
        stale.ask(GetLog()).result(5)
    assert caught.value.type_name == "FencingTokenMismatchError"


def test_an_unfenced_handler_accepts_any_token(service) -> None:
    service.start_endpoint(Leader("leader"))
    answer = service.gateway(Gateway, "leader", None).ask(Append(1, 2)).result(5)
    assert answer.entries == ((1, 2),)


def test_a_message_over_the_framesize_is_refused_at_the_sender() -> None:
    small = LocalRpcService(framesize=4096)
    try:
        small.start_endpoint(Recorder())
        with pytest.raises(FrameTooLargeError, match=r"over rpc.framesize = 4096 bytes"):
            small.gateway(Gateway, "recorder").tell(Blob("x" * 5000))
    finally:
        small.close()


def test_an_answer_over_the_framesize_fails_the_ask_instead_of_vanishing() -> None:
    small = LocalRpcService(framesize=4096)
    try:
        small.start_endpoint(Recorder())
        gateway = small.gateway(Gateway, "recorder")
        for sequence in range(1000):
            gateway.tell(Append(0, sequence))
        with pytest.raises(RemoteError, match="FrameTooLargeError"):
            gateway.ask(GetLog()).result(5)
    finally:
        small.close()


def test_schedule_runs_on_the_main_thread_after_the_delay(service) -> None:
    recorder = service.start_endpoint(Recorder())
    seen: list[str] = []
    recorder.schedule(0.05, lambda: seen.append(threading.current_thread().name))
    wait_for(lambda: seen, 5, "the scheduled call")
    assert seen == ["endpoint-recorder"]


def test_on_start_runs_before_the_first_message_and_on_stop_after_the_last(service) -> None:
    order: list[str] = []

    class Lifecycle(Recorder):
        def on_start(self) -> None:
            order.append("start")

        def on_stop(self) -> None:
            order.append("stop")

        @handler(Append)
        def append(self, msg: Append) -> None:
            order.append("message")

    endpoint = service.start_endpoint(Lifecycle("lifecycle"))
    service.gateway(Gateway, "lifecycle").tell(Append(0, 0))
    wait_for(lambda: "message" in order, 5, "the message")
    service.stop_endpoint(endpoint)
    assert order == ["start", "message", "stop"]


def test_asks_behind_the_stop_in_the_mailbox_fail_loudly(service) -> None:
    gate = threading.Event()
    recorder = service.start_endpoint(Recorder())
    recorder.run_async(gate.wait, 5)
    recorder.stop()
    pending = service.gateway(Gateway, "recorder").ask(GetLog())
    gate.set()
    with pytest.raises(RemoteError, match="EndpointStoppedError"):
        pending.result(5)


def test_a_malformed_ask_is_answered_with_why_instead_of_timing_out(monkeypatch) -> None:
    """The receiver cannot read the request's body but can read where the answer goes:
    the asker hears the reason at once; the endpoint keeps serving."""
    service = LocalRpcService(ask_timeout=60.0)
    try:
        recorder = service.start_endpoint(Recorder())
        transmit = service._transmit

        def corrupting(target: str, data: bytes, *, heartbeat: bool) -> None:
            transmit(target, data.replace(b'"sequence":7', b'"sequence":"seven"'),
                     heartbeat=heartbeat)
        monkeypatch.setattr(service, "_transmit", corrupting)
        gateway = service.gateway(Gateway, "recorder")
        asked = gateway.ask(Append(1, 7))
        with pytest.raises(RemoteError, match="MalformedMessageError") as raised:
            asked.result(5)
        assert "recorder could not read the request" in str(raised.value)
        assert "Append.sequence: expected a whole number" in str(raised.value)
        gateway.tell(Append(1, 8))
        wait_for(lambda: recorder.entries == [(1, 8)], 5, "the tell after it handled")
    finally:
        service.close()


def test_a_payload_whose_routing_cannot_be_read_gets_no_answer() -> None:
    """Not JSON, or no reply address: nothing to answer, the message is dropped."""
    from clusterdeck.core.rpc._codec import routing_of
    assert routing_of(b"{not json", 4096) is None
    assert routing_of(b'{"kind": "ask", "from": 7}', 4096) is None
    assert routing_of(b"[1]", 4096) is None
    assert routing_of(b'{"kind": "ask", "id": "c1", "reply_to": "me"}' + b" " * 5000,
                      4096) is None
    routed = routing_of(b'{"kind": "ask", "from": "me", "id": "c1", "reply_to": "me"}', 4096)
    assert (routed.kind, routed.sender, routed.correlation_id, routed.reply_to) == (
        "ask", "me", "c1", "me")
