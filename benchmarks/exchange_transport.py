"""Which transport for result partitions between TaskManagers: MB/s, side by side.

Issue 13 asked to choose between Arrow Flight and HTTP with range requests by
measurement. Each transport serves one file of ``--mb`` MiB from a separate process (as
a producer TaskManager would) to this process (the consumer), which writes what it gets
to disk, as a consumer mirroring a partition does. In rounds, alternating:

- ``local read``: reading the same file from this machine's disk (page cache warm): what
  a consumer on a shared folder pays;
- ``data service http``: clusterdeck's data service on loopback (``fetch_file``);
- ``data service https``: the same with TLS and the pinned certificate (beyond loopback);
- ``arrow flight``: a pyarrow.flight server streaming the file as record batches of 1 MiB
  binary cells, ``do_get`` read batch by batch (only when pyarrow is importable: it is not
  a clusterdeck dependency; e.g. ``pip install --target DIR pyarrow`` and PYTHONPATH=DIR).

    python -m benchmarks.exchange_transport [--mb 256] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import machine_summary, markdown_table
from clusterdeck.core.dataservice.capability import capability
from clusterdeck.core.dataservice.client import fetch_file
from clusterdeck.core.protocol.wiring import DataEndpoint

CHUNK = 1024 * 1024


def serve(kind: str, root: str) -> None:
    """Child process: serve ``root`` and print where (one JSON line), until killed."""
    if kind == "flight":
        import pyarrow as pa
        import pyarrow.flight as flight

        class FileFlight(flight.FlightServerBase):
            def do_get(self, context, ticket):  # type: ignore[no-untyped-def]
                path = ticket.ticket.decode()
                schema = pa.schema([("chunk", pa.binary())])

                def batches():  # type: ignore[no-untyped-def]
                    with open(path, "rb") as handle:
                        while block := handle.read(CHUNK):
                            yield pa.record_batch([pa.array([block], pa.binary())], schema)
                return flight.GeneratorStream(schema, batches())

        server = FileFlight("grpc://127.0.0.1:0")
        print(json.dumps({"url": f"grpc://127.0.0.1:{server.port}"}), flush=True)
        server.serve()
        return
    from clusterdeck.core.dataservice import capability as caps
    from clusterdeck.core.dataservice.server import DataServer

    key = caps.new_key()
    server = DataServer(key)
    tls = Path(root) / "tls" if kind == "https" else None
    address = server.start("127.0.0.1", "127.0.0.1", tls)
    print(json.dumps({"url": address.url, "fingerprint": address.fingerprint, "key": key}),
          flush=True)
    while True:
        time.sleep(3600)


def start_server(kind: str, root: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    process = subprocess.Popen([sys.executable, "-m", "benchmarks.exchange_transport",
                                "--serve", kind, "--root", str(root)],
                               stdout=subprocess.PIPE, text=True,
                               cwd=Path(__file__).resolve().parent.parent)
    assert process.stdout is not None
    return process, json.loads(process.stdout.readline())


def local_read(source: Path, dest: Path) -> None:
    with open(source, "rb") as handle, open(dest, "wb") as out:
        while block := handle.read(CHUNK):
            out.write(block)


def http_fetch(root: Path, source: Path, info: dict[str, str]) -> Callable[[Path], None]:
    endpoint = DataEndpoint("bench", info["url"], info["fingerprint"],
                            capability(info["key"], str(root)))
    return lambda dest: fetch_file(endpoint, str(root), str(source), str(dest))


def flight_fetch(source: Path, info: dict[str, str]) -> Callable[[Path], None]:
    import pyarrow.flight as flight

    client = flight.connect(info["url"])

    def fetch(dest: Path) -> None:
        reader = client.do_get(flight.Ticket(str(source).encode()))
        with open(dest, "wb") as out:
            for batch in reader:
                for cell in batch.data.column(0):
                    out.write(cell.as_buffer())
    return fetch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", choices=("http", "https", "flight"))
    parser.add_argument("--root")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.root)
        return 0
    try:
        import pyarrow.flight  # noqa: F401
        kinds = ["http", "https", "flight"]
    except ImportError:
        kinds = ["http", "https"]
        print("pyarrow.flight not importable: Arrow Flight is left out", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="exchange-bench-") as folder:
        root = Path(folder)
        source = root / "partitions" / "p" / "part-0.parquet"
        source.parent.mkdir(parents=True)
        with open(source, "wb") as out:
            for _ in range(args.mb):
                out.write(os.urandom(CHUNK))
        servers = {kind: start_server(kind, root) for kind in kinds}
        try:
            ways: dict[str, Callable[[Path], None]] = {
                "local read": lambda dest: local_read(source, dest)}
            for kind in ("http", "https"):
                ways[f"data service {kind}"] = http_fetch(root, source, servers[kind][1])
            if "flight" in servers:
                ways["arrow flight"] = flight_fetch(source, servers["flight"][1])
            rates = measure(ways, root / "copy", args.mb, args.rounds)
        finally:
            for process, _ in servers.values():
                process.kill()
                process.wait()
    print(f"{machine_summary()}; {args.mb} MiB file, {args.rounds} rounds\n")
    rows = [[name, f"{statistics.median(r):.0f}", f"{min(r):.0f}", f"{max(r):.0f}"]
            for name, r in rates.items()]
    print(markdown_table(["transport", "MB/s median", "min", "max"], rows))
    return 0


def measure(ways: dict[str, Callable[[Path], None]], dest: Path, mb: int,
            rounds: int) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            started = time.perf_counter()
            way(dest)
            elapsed = time.perf_counter() - started
            assert dest.stat().st_size == mb * CHUNK, name
            rates[name].append(mb * CHUNK / 1e6 / elapsed)
            dest.unlink()
    return rates


if __name__ == "__main__":
    sys.exit(main())
