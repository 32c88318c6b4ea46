"""How records cross a streaming exchange, and how a keyed window pre-aggregates a batch:
Arrow against the JSON of before (docs/benchmarks.md, "Columnar records").

- **codec**: a batch of elements ``(timestamp, record)`` encoded into the exchange's data
  buffers of 32 KiB and decoded back, in one process (no network: the codec's own cost).
  ``arrow`` is core/engine/arrowbuffers.py (typed columns, or a column of tagged JSON per
  record); ``json`` is the format of frame protocol 2, kept here: a JSON array of
  ``[timestamp, encode_record(record)]`` per buffer. Records/s is the batch's records
  over the time to encode and decode it; bytes/record what the buffers weigh.
- **pre-aggregation**: a batch's keyed window count and sum over a field, tumbling and
  sliding, by the per-record path (``WindowContributions`` then ``PreAggregated``, a Python
  call per record) and by columnar.py (numpy over the batch), both in this process.

    python -m benchmarks.exchange_codec [--records 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import machine_summary, markdown_table, median
from clusterdeck.core.engine.arrowbuffers import decode_buffer, encode_buffers
from clusterdeck.core.engine.columnar import ColumnarWindowPartials
from clusterdeck.core.engine.records import decode_record, encode_record
from clusterdeck.core.engine.streamio import BUFFER_BYTES
from clusterdeck.core.streaming.eventtime import SlidingWindows, TumblingWindows, WindowAssigner

Element = tuple[float | None, Any]


def json_buffers(elements: Sequence[Element]) -> list[bytes]:
    """Frame protocol 2's data buffers: JSON arrays of [timestamp, tagged record]."""
    buffers, start, size = [], 0, 0
    encoded = [json.dumps([t, encode_record(r)]) for t, r in elements]
    for index, text in enumerate(encoded):
        if size and size + len(text) > BUFFER_BYTES:
            buffers.append(f"[{','.join(encoded[start:index])}]".encode())
            start, size = index, 0
        size += len(text) + 1
    if start < len(encoded):
        buffers.append(f"[{','.join(encoded[start:])}]".encode())
    return buffers


def json_elements(payload: bytes) -> list[Element]:
    return [(t, decode_record(text)) for t, text in json.loads(payload)]


CODECS: dict[str, tuple[Callable[[Sequence[Element]], list[bytes]],
                        Callable[[bytes], list[Element]]]] = {
    "json (protocol 2)": (json_buffers, json_elements),
    "arrow": (lambda elements: encode_buffers(elements, BUFFER_BYTES), decode_buffer),
}

SHAPES: dict[str, Callable[[int], Any]] = {
    "(int, str)": lambda i: (i, f"key-{i % 100}"),
    "(int, float, str)": lambda i: (i, i * 0.25, f"sensor-{i % 100}"),
    "dict": lambda i: {"id": i, "key": f"key-{i % 100}", "value": i * 0.25},
}


def measure_codecs(elements: list[Element], rounds: int) -> dict[str, list[float]]:
    """Per codec: median records/s of encoding, of decoding, and of both; bytes a record.
    The codecs alternate within each round, so the neighbours' load falls on both."""
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in CODECS}
    sizes: dict[str, int] = {}
    for _ in range(rounds):
        for name, (encode, decode) in CODECS.items():
            started = time.perf_counter()
            buffers = encode(elements)
            encoded = time.perf_counter()
            back = [element for buffer in buffers for element in decode(buffer)]
            decoded = time.perf_counter()
            assert len(back) == len(elements)
            times[name][0].append(encoded - started)
            times[name][1].append(decoded - encoded)
            sizes[name] = sum(map(len, buffers))
    count = len(elements)
    return {name: [count / median(encoding), count / median(decoding),
                   count / (median(encoding) + median(decoding)), sizes[name] / count]
            for name, (encoding, decoding) in times.items()}


def measure_windows(elements: list[Element], rounds: int, function: str,
                    assigner: WindowAssigner) -> tuple[float, float]:
    """Median records/s of the per-record and the vectorised pre-aggregation."""
    partials = ColumnarWindowPartials((1,), function, 0, assigner, -math.inf)
    assert partials.per_record(elements) == partials.vectorised(elements)
    times: dict[str, list[float]] = {"per record": [], "columnar": []}
    for _ in range(rounds):
        for name, run in (("per record", partials.per_record),
                          ("columnar", partials.vectorised)):
            started = time.perf_counter()
            run(elements)
            times[name].append(time.perf_counter() - started)
    return (len(elements) / median(times["per record"]),
            len(elements) / median(times["columnar"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {machine_summary()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{args.records:,} records a batch, median of {args.rounds} rounds\n")
    rows = []
    for shape, make in SHAPES.items():
        elements = [(i * 0.001, make(i)) for i in range(args.records)]
        for codec, (encoding, decoding, both, size) in measure_codecs(elements,
                                                                     args.rounds).items():
            rows.append([shape, codec, f"{encoding:,.0f}", f"{decoding:,.0f}", f"{both:,.0f}",
                         f"{size:.1f}"])
    print(markdown_table(["records", "codec", "encode rec/s", "decode rec/s",
                          "encode+decode rec/s", "bytes/record"], rows))
    print()
    rows = []
    elements = [(i * 0.001, (i % 1000, f"key-{i % 100}")) for i in range(args.records)]
    for window, assigner in (("tumbling 1 s", TumblingWindows(1.0)),
                             ("sliding 2 s every 0.5 s", SlidingWindows(2.0, 0.5))):
        for function in ("count", "sum", "mean"):
            per_record, columnar = measure_windows(elements, args.rounds, function, assigner)
            rows.append([window, function, f"{per_record:,.0f}", f"{columnar:,.0f}",
                         f"{columnar / per_record:.1f}x"])
    print(markdown_table(["window", "function", "per record rec/s", "columnar rec/s",
                          "speed-up"], rows))


if __name__ == "__main__":
    main()
