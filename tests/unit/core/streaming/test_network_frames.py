"""The channel wire format: frames round-trip, and no bytes at all get past the decoder
but as frames or a FrameError, with every bound checked before a body is buffered."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdeck.core.streaming.network import frames
from clusterdeck.core.streaming.network.frames import (
    CONSUMER_KINDS,
    MAX_CONTROL_BODY,
    PRODUCER_KINDS,
    Credit,
    DataBuffer,
    EndOfPartition,
    ErrorFrame,
    Event,
    FrameDecoder,
    FrameError,
    FrameKind,
    Hello,
)

CAPABILITY = "ab" * 32


def producer_decoder(max_body: int = 4096) -> FrameDecoder:
    return FrameDecoder(max_body, PRODUCER_KINDS)


def consumer_decoder() -> FrameDecoder:
    return FrameDecoder(MAX_CONTROL_BODY, CONSUMER_KINDS)


def test_every_frame_round_trips() -> None:
    sent = [DataBuffer(b"records"), Event(b"barrier 3"), DataBuffer(b""), EndOfPartition(),
            ErrorFrame("gone", retryable=True)]
    assert producer_decoder().feed(b"".join(frames.encode(f) for f in sent)) == sent
    asked = [Hello("job-1/vertex-2/0", 3, CAPABILITY, 1 << 20), Credit(4),
             Hello("p", 0, CAPABILITY, 1024, consumer="taskmanager-2")]
    assert consumer_decoder().feed(b"".join(frames.encode(f) for f in asked)) == asked


def test_a_frame_split_anywhere_arrives_whole_once() -> None:
    data = frames.encode(DataBuffer(b"x" * 100)) + frames.encode(Event(b"e"))
    decoder = producer_decoder()
    received = []
    for index in range(len(data)):
        received += decoder.feed(data[index:index + 1])
    assert received == [DataBuffer(b"x" * 100), Event(b"e")]


def test_an_oversized_length_is_refused_from_its_header_alone() -> None:
    with pytest.raises(FrameError, match="of 10000001 bytes"):
        consumer_decoder().feed(struct.pack("!IB", 10_000_001, FrameKind.HELLO))


def test_a_kind_from_the_other_direction_is_refused() -> None:
    with pytest.raises(FrameError, match="not accepted"):
        consumer_decoder().feed(frames.encode(DataBuffer(b"data to a producer")))
    with pytest.raises(FrameError, match="not accepted"):
        producer_decoder().feed(frames.encode(Credit(1)))


def test_a_zero_length_frame_is_refused() -> None:
    with pytest.raises(FrameError):
        producer_decoder().feed(struct.pack("!IB", 0, FrameKind.BUFFER))


@pytest.mark.parametrize("hello", [
    Hello("", 0, CAPABILITY, 1024),
    Hello("p", 0, "not-hex" * 9, 1024),
    Hello("p", 0, CAPABILITY[:-2], 1024),
    Hello("p", 0, CAPABILITY, 1024, consumer="../taskmanager-2"),
    Hello("p", 0, CAPABILITY, 1024, consumer="t" * 65),
])
def test_a_malformed_hello_is_refused(hello: Hello) -> None:
    with pytest.raises(FrameError):
        consumer_decoder().feed(frames.encode(hello))


def test_a_credit_of_zero_or_beyond_the_bound_is_refused() -> None:
    for count in (0, frames.MAX_CREDIT + 1):
        with pytest.raises(FrameError, match="credit"):
            consumer_decoder().feed(frames.encode(Credit(count)))


@given(st.binary(max_size=2000))
@settings(max_examples=400, deadline=None)
def test_arbitrary_bytes_give_frames_or_a_frame_error(data: bytes) -> None:
    for decoder in (consumer_decoder(), producer_decoder(512)):
        try:
            decoded = decoder.feed(data)
        except FrameError:
            continue
        assert all(isinstance(f, (Hello, Credit, DataBuffer, Event, EndOfPartition,
                                  ErrorFrame)) for f in decoded)


producer_frames = st.one_of(
    st.binary(max_size=300).map(DataBuffer), st.binary(max_size=50).map(Event),
    st.just(EndOfPartition()),
    st.builds(ErrorFrame, st.text(max_size=40), st.booleans()))


@given(st.lists(producer_frames, max_size=20), st.lists(st.integers(1, 64), max_size=40))
@settings(max_examples=300, deadline=None)
def test_any_stream_of_frames_cut_anyhow_decodes_to_the_same_frames(
        sent: list[frames.Frame], cuts: list[int]) -> None:
    data = b"".join(frames.encode(f) for f in sent)
    decoder = producer_decoder(512)
    received, offset = [], 0
    for cut in cuts:
        received += decoder.feed(data[offset:offset + cut])
        offset += cut
    received += decoder.feed(data[offset:])
    assert received == sent
