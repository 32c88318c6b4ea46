"""Fetching input partitions from a peer that went silent (a cut with no RST): the fetch
gives up within its bound, and cancelling the attempt ends it at once (issue 41)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clusterdeck.core.dataservice.client import FetchError, fetch_file
from clusterdeck.core.engine.exchange import InputPartition
from clusterdeck.core.protocol.wiring import DataEndpoint, ResultPartitionRef
from clusterdeck.core.streaming.network import ChannelError
from clusterdeck.core.taskmanager import partitionfetch
from clusterdeck.core.taskmanager.tasks import TaskCanceled, _unreachable


@pytest.fixture
def silent_peer() -> Iterator[DataEndpoint]:
    """A data service address whose kernel takes connections (its backlog) and whose
    process never answers: what a fetch meets once a cut drops the peer's every frame
    after the connection was made."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        port = listener.getsockname()[1]
        yield DataEndpoint("taskmanager-2", f"http://127.0.0.1:{port}", "", "token")
    finally:
        listener.close()


def test_a_fetch_from_a_silent_peer_gives_up_within_tries_times_its_stall_timeout(
        silent_peer: DataEndpoint, tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(FetchError, match="after 2 tries"):
        fetch_file(silent_peer, str(tmp_path), str(tmp_path / "partitions" / "f"),
                   timeout=0.3, tries=2)
    assert time.monotonic() - started < 0.3 * 2 + 1.0


def test_a_stopped_fetch_ends_within_one_stall_timeout_not_after_every_try(
        silent_peer: DataEndpoint, tmp_path: Path) -> None:
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    with pytest.raises(FetchError, match="stopped, its attempt was cancelled"):
        fetch_file(silent_peer, str(tmp_path), str(tmp_path / "partitions" / "f"),
                   timeout=1.0, tries=20, stop=stop)
    assert time.monotonic() - started < 2.0


def _deployment(endpoint: DataEndpoint, work_dir: Path) -> Any:
    return SimpleNamespace(attempt_id="job-1/reduce#0/a0", work_dir=str(work_dir),
                           data_endpoints=(endpoint,))


def _partition(work_dir: Path, producer: int = 0) -> InputPartition:
    return InputPartition(str(work_dir / "partitions" / f"job-1_source-{producer}-a0"
                              / "reduce.0" / "__part=0"), "reduce", 0,
                          ResultPartitionRef(f"job-1/source#{producer}/a0", "source",
                                             producer, 0, "taskmanager-2"))


def test_cancelling_the_attempt_ends_its_fetch_at_once_while_the_peer_is_silent(
        silent_peer: DataEndpoint, tmp_path: Path) -> None:
    canceled = threading.Event()
    fetch_missing = partitionfetch.fetcher(_deployment(silent_peer, tmp_path), str(tmp_path),
                                           canceled)
    threading.Timer(0.3, canceled.set).start()
    started = time.monotonic()
    with pytest.raises(TaskCanceled):
        fetch_missing([_partition(tmp_path)])
    assert time.monotonic() - started < 0.3 + partitionfetch.CANCEL_CHECK + 0.5


def test_a_partition_that_cannot_be_fetched_says_why_and_nothing_waits_for_it(
        tmp_path: Path) -> None:
    nobody = DataEndpoint("taskmanager-2", "http://127.0.0.1:1", "", "token")
    fetch_missing = partitionfetch.fetcher(_deployment(nobody, tmp_path), str(tmp_path),
                                           threading.Event())
    partition = _partition(tmp_path)
    why = fetch_missing([partition])
    assert list(why) == [partition]
    assert "fetching it failed" in why[partition].why
    assert why[partition].unanswered  # refused: its data service is not there to ask


@pytest.fixture
def answering_peer() -> Iterator[DataEndpoint]:
    """A data service that answers every request: 404, it has no such file."""

    class NotHere(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404, "no such partition")

        def log_message(self, *_args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotHere)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield DataEndpoint("taskmanager-2", f"http://127.0.0.1:{server.server_port}", "",
                           "token")
    finally:
        server.shutdown()
        server.server_close()


def test_a_peer_that_answers_it_has_no_such_partition_is_not_taken_for_unreachable(
        answering_peer: DataEndpoint, tmp_path: Path) -> None:
    fetch_missing = partitionfetch.fetcher(_deployment(answering_peer, tmp_path),
                                           str(tmp_path), threading.Event())
    partition = _partition(tmp_path)

    why = fetch_missing([partition])

    assert "404" in why[partition].why and not why[partition].unanswered


def test_after_one_fetch_a_silent_peer_did_not_answer_its_other_partitions_wait_no_more(
        silent_peer: DataEndpoint, tmp_path: Path, monkeypatch) -> None:
    """Ten partitions of one silent peer, four fetched at a time: the first wave waits out
    the stall timeout once, the rest are not asked for (not three more waves)."""
    real_fetch_file = partitionfetch.fetch_file
    monkeypatch.setattr(partitionfetch, "fetch_file", lambda *args, **kwargs: real_fetch_file(
        *args, **{**kwargs, "timeout": 0.5, "tries": 1}))
    fetch_missing = partitionfetch.fetcher(_deployment(silent_peer, tmp_path), str(tmp_path),
                                           threading.Event())
    partitions = [_partition(tmp_path, producer) for producer in range(10)]
    started = time.monotonic()
    why = fetch_missing(partitions)
    assert time.monotonic() - started < 0.5 * 2  # one wave, not three
    assert set(why) == set(partitions)
    assert sum("did not answer a fetch of another partition" in w.why
               for w in why.values()) >= 6
    assert all(w.unanswered for w in why.values())


def test_the_stall_timeout_given_is_the_one_each_fetch_waits(
        silent_peer: DataEndpoint, tmp_path: Path) -> None:
    """taskmanager.data.fetch-timeout reaches the fetches: a silent peer is given up on
    after its three tries of 0.2 s, not of the 10 s default."""
    fetch_missing = partitionfetch.fetcher(_deployment(silent_peer, tmp_path), str(tmp_path),
                                           threading.Event(), timeout=0.2)
    started = time.monotonic()
    why = fetch_missing([_partition(tmp_path)])
    assert time.monotonic() - started < 0.2 * 3 + 1.5
    assert "fetching it failed" in why[_partition(tmp_path)].why


def test_an_unreachable_producer_is_found_however_deep_in_the_failures_chain() -> None:
    """A stream channel's ChannelError is raised again by the gate and may be wrapped by
    the task: the failure reported still names the TaskManager it could not reach."""
    try:
        try:
            try:
                raise ChannelError("nothing served", unreachable=("taskmanager-7",))
            except ChannelError as first:
                raise ChannelError(str(first)) from first
        except ChannelError as again:
            raise RuntimeError("the task failed") from again
    except RuntimeError as error:
        assert _unreachable(error) == ("taskmanager-7",)
    assert _unreachable(ValueError("the user's own")) == ()
