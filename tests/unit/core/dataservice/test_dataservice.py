"""The data service: a real HTTP(S) server on loopback and the client that fetches from it."""

from __future__ import annotations

import json
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdeck.core.dataservice import capability
from clusterdeck.core.dataservice.client import FetchError, fetch_file
from clusterdeck.core.dataservice.server import (
    FILE_ROUTE,
    DataServer,
    DataServiceAddress,
    _Refused,
    served_path,
)
from clusterdeck.core.protocol.wiring import DataEndpoint
from clusterdeck.core.taskmanager.partitionfetch import mirror_partition


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[DataServer, DataServiceAddress, Path]]:
    root = tmp_path / "job"
    (root / "partitions" / "a1").mkdir(parents=True)
    server = DataServer(capability.new_key(), max_connections=4)
    address = server.start("127.0.0.1", "127.0.0.1", None)
    try:
        yield server, address, root
    finally:
        server.stop()


def endpoint_for(server: DataServer, address: DataServiceAddress, root: Path) -> DataEndpoint:
    return DataEndpoint("taskmanager-2", address.url, address.fingerprint,
                        capability.capability(server.key, str(root)))


def test_a_file_arrives_whole_at_another_path(served, tmp_path: Path) -> None:
    server, address, root = served
    data = os.urandom(3 * 1024 * 1024 + 17)
    source = root / "partitions" / "a1" / "part-0.parquet"
    source.write_bytes(data)
    dest = tmp_path / "here" / "part-0.parquet"
    size = fetch_file(endpoint_for(server, address, root), str(root), str(source), str(dest))
    assert size == len(data)
    assert dest.read_bytes() == data
    assert list(dest.parent.iterdir()) == [dest]  # no partial copy left beside it


def test_a_job_kept_elsewhere_here_is_served_by_the_jobmanagers_path(tmp_path: Path) -> None:
    """A TaskManager that keeps a job in a stand-in folder serves it by the path everyone
    else names it by (core/taskmanager/jobfolders.py)."""
    named, kept = "/nowhere/clusters/c/work/job-1", tmp_path / "stand-in"
    (kept / "collect").mkdir(parents=True)
    (kept / "collect" / "rows.json").write_text("[1, 2]")
    server = DataServer(capability.new_key(), locate={named: str(kept)}.__getitem__)
    address = server.start("127.0.0.1", "127.0.0.1", None)
    try:
        endpoint = DataEndpoint("taskmanager-2", address.url, address.fingerprint,
                                capability.capability(server.key, named))
        fetch_file(endpoint, named, f"{named}/collect/rows.json", str(tmp_path / "rows"))
    finally:
        server.stop()
    assert (tmp_path / "rows").read_text() == "[1, 2]"


def test_a_missing_file_is_missing_and_leaves_nothing(served, tmp_path: Path) -> None:
    server, address, root = served
    dest = tmp_path / "here" / "gone.parquet"
    with pytest.raises(FetchError) as caught:
        fetch_file(endpoint_for(server, address, root), str(root),
                   str(root / "partitions" / "a1" / "gone.parquet"), str(dest))
    assert caught.value.missing
    assert "taskmanager-2" in str(caught.value) and "404" in str(caught.value)
    assert list(dest.parent.iterdir()) == []


def test_a_capability_opens_only_its_own_folder(served, tmp_path: Path) -> None:
    server, address, root = served
    other = tmp_path / "other-job"
    (other / "partitions").mkdir(parents=True)
    (other / "partitions" / "secret").write_text("no")
    for_root = endpoint_for(server, address, root)
    with pytest.raises(FetchError, match="403") as caught:
        fetch_file(for_root, str(other), str(other / "partitions" / "secret"),
                   str(tmp_path / "stolen"))
    assert not caught.value.missing
    forged = DataEndpoint("taskmanager-2", address.url, "", "0" * 64)
    (root / "partitions" / "a1" / "f").write_text("x")
    with pytest.raises(FetchError, match="403"):
        fetch_file(forged, str(root), str(root / "partitions" / "a1" / "f"),
                   str(tmp_path / "stolen2"))


def test_nothing_outside_the_served_folders(tmp_path: Path) -> None:
    root = tmp_path / "job"
    (root / "partitions").mkdir(parents=True)
    (root / "secrets.txt").write_text("no")
    (root / "partitions" / "link").symlink_to(root / "secrets.txt")
    for relative in ("secrets.txt", "partitions/../secrets.txt", "partitions/link",
                     "/etc/passwd", "partitions", "partitions//x", "output/./x"):
        with pytest.raises(_Refused):
            served_path(str(root), relative)
    assert served_path(str(root), "partitions/a/b") == str(root / "partitions" / "a" / "b")


@given(st.text(alphabet="ab./\\\x00~", max_size=30))
def test_any_path_is_refused_or_stays_in_a_served_folder(relative: str) -> None:
    root = "/nonexistent-root/job"
    try:
        resolved = served_path(root, relative)
    except _Refused:
        return
    assert resolved.startswith(tuple(f"{root}/{f}/" for f in ("partitions", "collect",
                                                               "output")))


def raw_get(address: DataServiceAddress, query: str, headers: dict[str, str]) -> bytes:
    host, port = address.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        lines = [f"GET {query} HTTP/1.1", f"Host: {host}", "Connection: close",
                 *(f"{k}: {v}" for k, v in headers.items()), "", ""]
        conn.sendall("\r\n".join(lines).encode())
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_ranges_and_hostile_requests_get_clear_answers(served) -> None:
    server, address, root = served
    (root / "partitions" / "a1" / "f").write_bytes(b"0123456789")
    token = capability.capability(server.key, str(root))
    query = f"{FILE_ROUTE}?{urlencode({'root': str(root), 'path': 'partitions/a1/f'})}"
    auth = {"Authorization": f"Bearer {token}"}
    assert raw_get(address, query, {**auth, "Range": "bytes=4-"}).endswith(b"\r\n\r\n456789")
    assert b" 206 " in raw_get(address, query, {**auth, "Range": "bytes=-3"})
    assert raw_get(address, query, {**auth, "Range": "bytes=-3"}).endswith(b"789")
    assert b" 416 " in raw_get(address, query, {**auth, "Range": "bytes=50-"})
    assert b" 416 " in raw_get(address, query, {**auth, "Range": "pages=1"})
    assert b" 400 " in raw_get(address, f"{FILE_ROUTE}?root=a&root=b&path=x", auth)
    assert b" 404 " in raw_get(address, "/v1/other", auth)
    assert b" 403 " in raw_get(address, query, {"Authorization": "Bearer zz"})
    assert b" 414 " in raw_get(address, "x" * 70000, auth)  # still serving afterwards
    assert raw_get(address, query, auth).endswith(b"0123456789")


def test_tls_with_the_registered_certificate_only(tmp_path: Path) -> None:
    root = tmp_path / "job"
    (root / "collect").mkdir(parents=True)
    (root / "collect" / "rows.json").write_text("[1, 2]")
    server = DataServer(capability.new_key())
    address = server.start("127.0.0.1", "127.0.0.1", tmp_path / "tls")
    try:
        assert address.url.startswith("https://") and len(address.fingerprint) == 64
        good = endpoint_for(server, address, root)
        fetch_file(good, str(root), str(root / "collect" / "rows.json"), str(tmp_path / "r"))
        assert json.loads((tmp_path / "r").read_text()) == [1, 2]
        impostor = DataEndpoint(good.taskmanager_id, good.url, "ab" * 32, good.capability)
        with pytest.raises(FetchError, match="certificate other than"):
            fetch_file(impostor, str(root), str(root / "collect" / "rows.json"),
                       str(tmp_path / "r2"))
        host, port = address.url.removeprefix("https://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as plain:
            plain.sendall(b"GET / HTTP/1.1\r\n\r\n")  # not TLS: refused, server lives on
            with pytest.raises((ssl.SSLError, ConnectionError, TimeoutError)):
                if not plain.recv(100):
                    raise ConnectionError("closed")
        fetch_file(good, str(root), str(root / "collect" / "rows.json"), str(tmp_path / "r3"))
    finally:
        server.stop()


def test_a_broken_transfer_resumes_with_a_range_request(served, tmp_path: Path,
                                                         monkeypatch) -> None:
    server, address, root = served
    data = os.urandom(5 * 1024 * 1024)
    (root / "output").mkdir()
    source = root / "output" / "big.stdout"
    source.write_bytes(data)
    import clusterdeck.core.dataservice.client as client

    real_transfer = client._transfer
    calls: list[int] = []

    def flaky(endpoint, root_, relative, partial, got, timeout, stop):
        calls.append(got)
        if len(calls) == 1:  # the first request dies half way
            with open(partial, "ab") as out:
                out.write(data[:1_000_000])
            raise ConnectionResetError("cut")
        return real_transfer(endpoint, root_, relative, partial, got, timeout, stop)

    monkeypatch.setattr(client, "_transfer", flaky)
    fetch_file(endpoint_for(server, address, root), str(root), str(source),
               str(tmp_path / "big"))
    assert calls == [0, 1_000_000]
    assert (tmp_path / "big").read_bytes() == data


def test_a_partition_is_mirrored_marker_last(served, tmp_path: Path) -> None:
    server, address, root = served
    partition = root / "partitions" / "a1" / "v2.0" / "__part=3"
    partition.mkdir(parents=True)
    (partition / "part-0.parquet").write_bytes(b"P" * 1000)
    (partition / "part-1.parquet").write_bytes(b"Q" * 10)
    (partition.parent / "_schema.json").write_text('{"type": "struct", "fields": []}')
    (partition / "_complete.json").write_text(json.dumps(
        {"files": ["part-0.parquet", "part-1.parquet"]}))
    here = tmp_path / "consumer"
    mirror_partition(endpoint_for(server, address, root), str(root), str(partition), str(here))
    mirrored = here / "partitions" / "a1" / "v2.0" / "__part=3"
    assert (mirrored / "part-0.parquet").read_bytes() == b"P" * 1000
    assert json.loads((mirrored / "_complete.json").read_text())["files"] == [
        "part-0.parquet", "part-1.parquet"]
    assert (mirrored.parent / "_schema.json").exists()

    (partition / "part-1.parquet").unlink()  # a producer's file gone: no marker here
    again = tmp_path / "consumer2"
    with pytest.raises(FetchError):
        mirror_partition(endpoint_for(server, address, root), str(root), str(partition),
                         str(again))
    assert not (again / "partitions" / "a1" / "v2.0" / "__part=3" / "_complete.json").exists()


def test_slots_mirroring_one_partition_at_once_all_get_it_whole(served,
                                                                 tmp_path: Path) -> None:
    """Consumers in several slots of one TaskManager fetch one producer's partition and
    its edge's schema at the same moment: none fails, none sees a file written twice."""
    server, address, root = served
    partition = root / "partitions" / "a1" / "v2.0" / "__part=0"
    partition.mkdir(parents=True)
    data = os.urandom(2 * 1024 * 1024)
    (partition / "part-0.parquet").write_bytes(data)
    schema = '{"type": "struct", "fields": []}'
    (partition.parent / "_schema.json").write_text(schema)
    (partition / "_complete.json").write_text(json.dumps({"files": ["part-0.parquet"]}))
    here, endpoint = tmp_path / "consumer", endpoint_for(server, address, root)
    errors: list[BaseException] = []

    def mirror() -> None:
        try:
            mirror_partition(endpoint, str(root), str(partition), str(here))
        except BaseException as error:  # the test reports every one
            errors.append(error)

    threads = [threading.Thread(target=mirror) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    mirrored = here / "partitions" / "a1" / "v2.0" / "__part=0"
    assert (mirrored / "part-0.parquet").read_bytes() == data
    assert (mirrored.parent / "_schema.json").read_text() == schema
    assert sorted(p.name for p in mirrored.iterdir()) == ["_complete.json", "part-0.parquet"]
    assert sorted(p.name for p in mirrored.parent.iterdir()) == ["__part=0", "_schema.json"]


def test_a_malformed_marker_is_refused(served, tmp_path: Path) -> None:
    server, address, root = served
    partition = root / "partitions" / "a1" / "__part=0"
    partition.mkdir(parents=True)
    (partition / "_complete.json").write_text(json.dumps({"files": ["../../escape"]}))
    with pytest.raises(ValueError, match="malformed"):
        mirror_partition(endpoint_for(server, address, root), str(root), str(partition),
                         str(tmp_path / "c"))


def test_connections_beyond_the_limit_wait_their_turn(served) -> None:
    server, address, root = served
    (root / "partitions" / "a1" / "f").write_bytes(b"x" * 100)
    token = capability.capability(server.key, str(root))
    query = f"{FILE_ROUTE}?{urlencode({'root': str(root), 'path': 'partitions/a1/f'})}"
    host, port = address.url.removeprefix("http://").split(":")
    idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(4)]
    answers: list[bytes] = []
    waiting = threading.Thread(target=lambda: answers.append(
        raw_get(address, query, {"Authorization": f"Bearer {token}"})))
    try:
        waiting.start()
        waiting.join(0.5)
        assert waiting.is_alive()  # all four slots are held by idle connections
    finally:
        for conn in idle:
            conn.close()
    waiting.join(10)
    assert answers and answers[0].endswith(b"x" * 100)
