"""The wire codec refuses every malformed payload with a message that says why."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pytest

from clusterdeck.core.rpc import CodecError, Envelope, FrameTooLargeError, decode, encode, message


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


@message
@dataclass(frozen=True)
class Inner:
    name: str


@message
@dataclass(frozen=True)
class Sample:
    count: int
    ratio: float
    colour: Colour
    tags: tuple[str, ...] = ()
    inner: Inner | None = None
    extra: dict[str, int] | None = None
    by_colour: dict[Colour, int] | None = None


FRAME = 4096


def wire(**overrides) -> bytes:
    document = {"v": 1, "kind": "tell", "from": "a", "id": "", "reply_to": "", "fencing": None,
                "type": "Sample", "body": {"count": 1, "ratio": 0.5, "colour": "red"},
                "error": None}
    document.update(overrides)
    return json.dumps(document).encode()


def test_a_message_survives_the_round_trip() -> None:
    sample = Sample(3, 1.5, Colour.BLUE, ("a", "b"), Inner("x"), {"k": 2}, {Colour.RED: 1})
    decoded = decode(encode(Envelope("tell", "me", sample), FRAME), FRAME)
    assert decoded.message == sample
    assert list(decoded.message.by_colour) == [Colour.RED]
    assert isinstance(next(iter(decoded.message.by_colour)), Colour)
    assert decoded.sender == "me"


@pytest.mark.parametrize(("payload", "complaint"), [
    (b"{not json", "malformed JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (wire(v=2), "unknown wire version 2"),
    (wire(kind="shout"), "unknown message kind"),
    (wire(type="Pickle"), "unknown message type 'Pickle'"),
    (wire(body={"count": "1", "ratio": 0.5, "colour": "red"}), "Sample.count: expected a whole"),
    (wire(body={"count": True, "ratio": 0.5, "colour": "red"}), "Sample.count: expected a whole"),
    (wire(body={"count": 1, "ratio": 0.5, "colour": "green"}), "is not a Colour"),
    (wire(body={"count": 1, "ratio": 0.5}), "missing field 'colour'"),
    (wire(body={"count": 1, "ratio": 0.5, "colour": "red", "evil": 1}), "unknown field"),
    (wire(body={"count": 1, "ratio": 0.5, "colour": "red", "tags": [1]}), "Sample.tags[0]"),
    (wire(body={"count": 1, "ratio": 0.5, "colour": "red", "inner": {"name": 5}}),
     "Sample.inner"),
    (wire(body={"count": 1, "ratio": 0.5, "colour": "red", "by_colour": {"green": 1}}),
     "Sample.by_colour key: 'green' is not a Colour"),
    (wire(body={"count": 1, "ratio": 0.5, "colour": "red", "by_colour": {"red": 1.5}}),
     "Sample.by_colour.red: expected a whole number"),
    (wire(fencing=7), "'fencing' must be a string"),
])
def test_the_codec_rejects_bad_payloads_clearly(payload: bytes, complaint: str) -> None:
    with pytest.raises(CodecError, match=re.escape(complaint)):
        decode(payload, FRAME)


def test_an_oversized_payload_is_rejected_on_receipt() -> None:
    with pytest.raises(FrameTooLargeError, match=r"over rpc\.framesize"):
        decode(b" " * (FRAME + 1), FRAME)


def test_an_oversized_message_is_refused_at_the_sender_naming_the_limit() -> None:
    big = Sample(1, 1.0, Colour.RED, tuple("x" * 100 for _ in range(100)))
    with pytest.raises(FrameTooLargeError, match=r"Sample message is \d+ bytes, over "
                                                 r"rpc\.framesize = 4096 bytes"):
        encode(Envelope("tell", "me", big), FRAME)


def test_an_unregistered_class_cannot_be_sent() -> None:
    @dataclass(frozen=True)
    class Unregistered:
        x: int

    with pytest.raises(CodecError, match="not a registered message type"):
        encode(Envelope("tell", "me", Unregistered(1)), FRAME)


@message
@dataclass(frozen=True)
class Loose:
    """Carries plain JSON of a user's: written the slow way, NaN refused."""
    params: dict[str, Any]
    label: str = ""


def test_a_typed_message_is_written_as_the_plain_json_walk_would_write_it() -> None:
    """orjson writes a typed message from its dataclasses; the JSON is the same."""
    from clusterdeck.core.rpc import to_data
    sample = Sample(3, 1.5, Colour.BLUE, ("a", "b"), Inner("naïve ☃"), {"k": 2}, {Colour.RED: 1})
    written = encode(Envelope("tell", "me", sample), FRAME)
    assert json.loads(written)["body"] == to_data(sample)
    assert "naïve ☃".encode() in written  # UTF-8, not \\u escapes: fewer bytes
    assert decode(written, FRAME).message == sample


def test_what_cannot_be_json_is_refused_at_the_sender_either_way() -> None:
    with pytest.raises(CodecError, match="Loose cannot be sent"):
        encode(Envelope("tell", "me", Loose({"x": float("nan")})), FRAME)
    with pytest.raises(CodecError, match="Sample cannot be sent"):
        encode(Envelope("tell", "me", Sample(1, 0.5, Colour.RED, ("\ud800",))), FRAME)
    with pytest.raises(CodecError, match="Loose cannot be sent"):
        encode(Envelope("tell", "me", Loose({"x": object()})), FRAME)


def compact(document: dict[str, Any]) -> bytes:
    """As a sender writes it (no spaces): the type where the receiver peeks for it."""
    return json.dumps(document, separators=(",", ":")).encode()


def test_plain_json_of_a_user_keeps_integers_of_any_size() -> None:
    """Read by json.loads: orjson would make a float of an integer beyond 64 bits."""
    loose = Loose({"big": 2**70, "small": -3, "ratio": 0.25})
    assert decode(encode(Envelope("tell", "me", loose), FRAME), FRAME).message == loose


def test_a_typed_message_read_the_fast_way_is_checked_as_strictly() -> None:
    envelope = {"v": 1, "kind": "tell", "from": "a", "id": "", "reply_to": "",
                "fencing": None, "type": "Sample", "error": None}
    with pytest.raises(CodecError, match=r"Sample\.count: expected a whole number"):
        decode(compact({**envelope, "body": {"count": 2**70, "ratio": 0.5, "colour": "red"}}),
               FRAME)
    with pytest.raises(CodecError, match="malformed JSON"):
        decode(compact({**envelope, "body": {"count": 1, "ratio": 0.5, "colour": "red"}}
                       ).replace(b"0.5", b"NaN"), FRAME)
    with pytest.raises(CodecError, match="malformed JSON"):
        decode(compact({**envelope, "body": {"count": 1, "ratio": 0.5, "colour": "red"}}
                       ).replace(b"0.5", b"1e400"), FRAME)


def test_the_type_the_document_names_decides_how_it_is_read_not_its_head() -> None:
    """A payload that names a typed message first and another one last (JSON's last key
    wins) is read as the last one, integers intact."""
    head = compact({"v": 1, "kind": "tell", "from": "a", "type": "Sample"})[:-1]
    payload = head + b',"type":"Loose","body":{"params":{"big":' + str(2**70).encode() + b"}}}"
    assert decode(payload, FRAME).message == Loose({"big": 2**70})
