"""A job's snapshot travels as typed data: it survives the codec whole, states as enums,
and a malformed one is refused on receipt like any other malformed message."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from clusterdeck.core.executiongraph import ExecutionState, FixedDelay, TaskFailure
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.failures import FailureRecord
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot, Truncation
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import CodecError, Envelope, decode, encode
from tests.unit.core.executiongraph.helpers import JOB_ID, Harness, word_count

FRAME = 256 * 1024


def failed_once() -> JobGraphSnapshot:
    """Two sources, one reducer: source 1 failed once (a restart is pending), source 0
    runs."""
    harness = Harness(word_count(sources=2, reducers=1), restart=FixedDelay(3, 5.0))
    harness.start()
    harness.grant_slots()
    harness.report(harness.attempt("source", 0), ExecutionState.RUNNING)
    harness.report(harness.attempt("source", 1), ExecutionState.FAILED, failure=TaskFailure(
        "ValueError", "bad line", "Traceback ...\nValueError: bad line", ("reading",)))
    return harness.graph.snapshot()


def sent(message: Any) -> bytes:
    return encode(Envelope("event", "jobmaster.job-1", message), FRAME)


def test_a_snapshot_survives_the_codec_with_its_states_as_enums() -> None:
    snapshot = failed_once()

    received = decode(sent(p.JobSnapshot(JOB_ID, snapshot)), FRAME).message

    assert received == p.JobSnapshot(JOB_ID, snapshot)
    graph = received.graph
    assert isinstance(graph, JobGraphSnapshot)
    assert graph.status is JobStatus.RUNNING and graph.truncated is Truncation.NONE
    assert all(isinstance(status, JobStatus) for status in graph.status_timestamps)
    source1 = graph.vertices[0].subtasks[1]
    assert source1.attempts[0].state is ExecutionState.FAILED
    assert all(isinstance(state, ExecutionState)
               for state in source1.attempts[0].state_timestamps)
    assert set(graph.vertices[0].state_counts) <= set(ExecutionState)
    assert isinstance(graph.root_cause, FailureRecord)
    assert graph.root_cause.failure.log_excerpt == ("reading",)


def test_an_execution_state_event_carries_its_failure_record_and_states_as_enums() -> None:
    record = failed_once().root_cause
    event = p.ExecutionStateEvent(JOB_ID, record.attempt_id, "source", 1, 0,
                                  ExecutionState.RUNNING, ExecutionState.FAILED, 2.0,
                                  "tm-1", 1, record)

    received = decode(sent(event), FRAME).message

    assert received == event
    assert received.new is ExecutionState.FAILED and received.failure == record


def body_of(message: Any) -> dict[str, Any]:
    return json.loads(sent(message))


def resent(document: dict[str, Any]) -> bytes:
    return json.dumps(document).encode()


def graph_of(document: dict[str, Any]) -> dict[str, Any]:
    return document["body"]["graph"]


def subtask(document: dict[str, Any], vertex: int = 0, index: int = 1) -> dict[str, Any]:
    return graph_of(document)["vertices"][vertex]["subtasks"][index]


SPOILERS: list[tuple[Callable[[dict[str, Any]], None], str]] = [
    (lambda d: subtask(d).update(state="WALKING"), "'WALKING' is not a ExecutionState"),
    (lambda d: graph_of(d).update(status="DONE"), "'DONE' is not a JobStatus"),
    (lambda d: graph_of(d)["vertices"][0].pop("name"), "missing field 'name'"),
    (lambda d: subtask(d)["attempts"][0]["state_timestamps"].update(LATER=1.0),
     "'LATER' is not a ExecutionState"),
    (lambda d: graph_of(d)["vertices"][1]["state_counts"].update(CREATED="2"),
     "expected a whole number"),
    (lambda d: graph_of(d)["root_cause"].pop("failure"),
     "JobSnapshot.graph.root_cause: missing field 'failure'"),
    (lambda d: graph_of(d).update(truncated="everything"), "is not a Truncation"),
    (lambda d: subtask(d)["attempts"][0].update(colour="red"), "unknown field(s) colour"),
    (lambda d: graph_of(d).update(vertices={}), "expected a list"),
]


@pytest.mark.parametrize(("spoil", "complaint"), SPOILERS)
def test_a_malformed_snapshot_is_refused_on_receipt(
        spoil: Callable[[dict[str, Any]], None], complaint: str) -> None:
    document = body_of(p.JobSnapshot(JOB_ID, failed_once()))
    spoil(document)
    with pytest.raises(CodecError, match=re.escape(complaint)):
        decode(resent(document), FRAME)


def test_an_event_with_a_state_that_is_not_one_is_refused() -> None:
    event = p.ExecutionStateEvent(JOB_ID, "job-1/source#0/a0", "source", 0, 0,
                                  ExecutionState.CREATED, ExecutionState.SCHEDULED, 1.0)
    document = body_of(event)
    document["body"]["new"] = "SCHEDULING"
    with pytest.raises(CodecError, match=re.escape("ExecutionStateEvent.new")):
        decode(resent(document), FRAME)


def test_a_result_keeps_its_flat_failures_and_reads_them_back_as_records() -> None:
    record = failed_once().root_cause
    assert FailureRecord.from_dict(record.to_dict()) == record
    never_started = FailureRecord.from_dict({"exception_type": "FileNotFoundError",
                                             "message": "no input", "traceback": "",
                                             "vertex_id": "", "subtask": -1})
    assert (never_started.attempt, never_started.taskmanager_id, never_started.timestamp) == (
        -1, None, 0.0)
