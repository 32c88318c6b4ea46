"""Hostile bytes are normal input: whatever arrives, the codec answers with a message or
with its own CodecError, never with another exception (which would end paho's network
thread, and with it the process's heartbeats)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.rpc import CodecError, Envelope, decode, message_types

FRAMESIZE = 1 << 20
FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                           allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30)


def decodes_or_refuses(data: bytes) -> None:
    try:
        envelope = decode(data, FRAMESIZE)
    except CodecError:
        return
    assert isinstance(envelope, Envelope)


@FUZZ
@given(st.binary(max_size=2000))
def test_any_bytes_decode_or_are_refused_by_the_codec(data: bytes) -> None:
    decodes_or_refuses(data)


@FUZZ
@given(type_name=st.sampled_from(sorted(message_types())), body=json_values,
       kind=st.sampled_from(["tell", "ask", "reply", "event", "other"]),
       sender=json_values)
def test_any_body_for_any_message_type_decodes_or_is_refused(type_name, body, kind,
                                                             sender) -> None:
    document = {"v": 1, "kind": kind, "from": sender, "type": type_name, "body": body}
    decodes_or_refuses(json.dumps(document).encode())


@FUZZ
@given(st.sampled_from([
    b"[" * 100_000 + b"]" * 100_000,                     # nesting
    b'{"v":1,"kind":"tell","id":' + b"9" * 5000 + b"}",  # an integer of 5,000 digits
    b'{"v":1e400,"kind":"tell"}',                        # a float that overflows
    b'{"v":1,"kind":"tell","from":"\\ud800"}',           # a lone surrogate
    b'{"v":1,"kind":"\xff\xfe"}',                       # bad UTF-8
    b'{"v":NaN}',
]))
def test_the_payloads_that_once_escaped_the_codec_are_refused(data: bytes) -> None:
    decodes_or_refuses(data)
    try:
        decode(data, FRAMESIZE)
    except CodecError as error:
        assert str(error)
    else:
        raise AssertionError("accepted")


def test_a_snapshot_with_a_lone_surrogate_in_a_name_is_refused() -> None:
    body = {"job_id": "\udc00"}
    data = json.dumps({"v": 1, "kind": "tell", "type": p.CancelJob.__name__,
                       "body": body}).encode()
    try:
        decode(data, FRAMESIZE)
    except CodecError as error:
        assert "CancelJob.job_id" in str(error)
    else:
        raise AssertionError("accepted")
