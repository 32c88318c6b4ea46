"""A script's output handed on while it runs: every byte once, in order, bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clusterdeck.core.client.outputfeed import OutputFeed
from clusterdeck.core.engine.liveoutput import LiveOutput, Piece
from clusterdeck.core.protocol import messages as p

writes = st.lists(st.tuples(st.sampled_from(["stdout", "stderr"]),
                            st.text(max_size=40)), max_size=30)


def as_messages(pieces: list[Piece]) -> list[p.JobOutput]:
    return [p.JobOutput("job", "a1", x.stream, f"/w/output/a1.{x.stream}", x.offset, x.text)
            for x in pieces]


def shown_by(messages: list[p.JobOutput]) -> tuple[dict[str, str], dict[str, int]]:
    shown = {"stdout": "", "stderr": ""}

    def write(stream: str, text: str) -> None:
        shown[stream] += text

    feed = OutputFeed(write)
    for message in messages:
        feed.receive("events/output/job", message)
    return shown, feed.close()


@given(writes, st.integers(1, 7), st.integers(1, 5))
def test_every_byte_arrives_once_and_in_order_with_its_files_offsets(
        written: list[tuple[str, str]], piece: int, most: int) -> None:
    live = LiveOutput()
    pieces: list[Piece] = []
    for stream, text in written:
        live.write(stream, text)
        pieces += live.take(piece, most)
    while taken := live.take(piece, most):
        pieces += taken
    assert all(len(x.text) <= piece for x in pieces)
    repeated = as_messages(pieces) + as_messages(pieces[::2])  # QoS 1 repeats some
    shown, counts = shown_by(repeated)
    for stream in ("stdout", "stderr"):
        whole = "".join(t for s, t in written if s == stream)
        as_file = whole.encode("utf-8", "replace")
        assert shown[stream].encode("utf-8", "replace") == as_file
        assert counts.get(f"/w/output/a1.{stream}", 0) == len(as_file)


def test_output_beyond_the_limit_skips_and_the_feed_stops_at_the_gap() -> None:
    live = LiveOutput(limit=10)
    live.write("stdout", "12345678\n")
    live.write("stdout", "too much for the feed\n")  # over the limit: the file only
    first = live.take(100, 10)
    live.write("stdout", "later\n")
    later = live.take(100, 10)
    assert [(x.offset, x.text) for x in first + later] == [(0, "12345678\n"), (31, "later\n")]
    shown, counts = shown_by(as_messages(first + later))
    assert shown["stdout"] == "12345678\n"  # the rest is read from the file, from byte 9
    assert counts == {"/w/output/a1.stdout": 9}


def test_a_piece_that_arrives_first_is_not_shown_before_the_ones_before_it() -> None:
    live = LiveOutput()
    live.write("stdout", "one\n")
    live.write("stderr", "two\n")
    live.write("stdout", "three\n")
    pieces = live.take(4, 10)  # stdout "one\n", "thre", "e\n"; stderr "two\n"
    first, later, last = [x for x in pieces if x.stream == "stdout"]
    (error,) = [x for x in pieces if x.stream == "stderr"]
    shown, counts = shown_by(as_messages([later, first, last, error]))
    assert shown == {"stdout": "", "stderr": "two\n"}
    assert counts == {"/w/output/a1.stderr": 4}


def test_many_small_writes_are_taken_as_few_large_pieces() -> None:
    """A loop of 40,000 prints (two writes each) is joined once when taken, not per
    write: the taking thread is the TaskManager's main thread, which sends heartbeats."""
    live = LiveOutput()
    for i in range(40_000):
        live.write("stdout", f"line {i:06d}")
        live.write("stdout", "\n")
    pieces = live.take(16_000, 1_000)
    assert len(pieces) == -(-40_000 * 12 // 16_000)
    assert "".join(x.text for x in pieces) == "".join(f"line {i:06d}\n" for i in range(40_000))
