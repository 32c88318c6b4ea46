"""Fetching a file from another TaskManager's data service into the same path here.

A consumer that cannot see a producer's result partition on its own disk, and the
JobManager that cannot see a task's collected rows, fetch the file from the TaskManager
that wrote it. The copy goes to a hidden file of its own beside the destination and is
renamed when whole, so a reader never sees half a file and two fetches of one file (two
slots reading partitions of one producer need its edge's schema) never write into each
other; a transfer that breaks is resumed with a range request (``tries`` times) from
where it stopped. Every failure is a FetchError that says which
TaskManager, which file and why: the caller turns it into the attempt's cause.

A peer cut off silently (frames dropped, no RST) answers nothing: each connect and each
read waits at most ``timeout`` (a stall, not a transfer's length), so a fetch from it
gives up within ``tries * timeout`` (30 s by default) and the consumer fails with
PartitionNotFound. ``stop``, set from another thread (the attempt is cancelled), ends a
fetch at its next chunk or try, and within one ``timeout`` when a read is blocked.
"""

from __future__ import annotations

import http.client
import os
import ssl
import tempfile
import threading
from urllib.parse import urlencode, urlsplit

from clusterdeck.core.dataservice.selfsigned import fingerprint_of
from clusterdeck.core.dataservice.server import FILE_ROUTE
from clusterdeck.core.protocol.wiring import DataEndpoint

CHUNK = 1024 * 1024
# Seconds a connect or a read may stall: a peer silent this long is taken for cut off
# (a busy one sends its next chunk well within it).
DEFAULT_TIMEOUT = 10.0
DEFAULT_TRIES = 3


class FetchError(Exception):
    """A file could not be fetched; ``missing`` when the TaskManager answered that it
    does not have it; ``unanswered`` when it did not answer at all, each try (refused,
    stalled, cut off mid-transfer): its data service cannot be reached from here."""

    def __init__(self, message: str, missing: bool = False, unanswered: bool = False) -> None:
        super().__init__(message)
        self.missing = missing
        self.unanswered = unanswered


def fetch_file(endpoint: DataEndpoint, root: str, path: str, dest: str | None = None, *,
               timeout: float = DEFAULT_TIMEOUT, tries: int = DEFAULT_TRIES,
               stop: threading.Event | None = None) -> int:
    """Copy ``path`` (under the job work dir ``root``) from ``endpoint`` to ``dest`` here
    (default: the same path); returns its size in bytes. Raises FetchError, also when
    ``stop`` is set meanwhile."""
    relative = os.path.relpath(path, root)
    dest = dest or path
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    got, total, problem = 0, None, ""
    handle, partial = tempfile.mkstemp(".part", f".{os.path.basename(dest)}.",
                                       os.path.dirname(dest))
    os.close(handle)
    try:
        for _ in range(max(1, tries)):
            try:
                got, total = _transfer(endpoint, root, relative, partial, got, timeout, stop)
            except (OSError, http.client.HTTPException) as error:
                problem = f"{type(error).__name__}: {error}"
                got = os.path.getsize(partial)
                continue
            os.replace(partial, dest)
            return total
        raise FetchError(f"{_where(endpoint, path)}: {problem} (after {tries} tries, "
                         f"{got} of {'?' if total is None else total} bytes)",
                         unanswered=True)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _transfer(endpoint: DataEndpoint, root: str, relative: str, partial: str, got: int,
              timeout: float, stop: threading.Event | None) -> tuple[int, int]:
    """One request: the file from byte ``got`` on, appended to ``partial``."""
    _check_stop(endpoint, relative, stop)
    connection = _connect(endpoint, timeout)
    try:
        headers = {"Authorization": f"Bearer {endpoint.capability}"}
        if got:
            headers["Range"] = f"bytes={got}-"
        connection.request("GET", f"{FILE_ROUTE}?{urlencode({'root': root, 'path': relative})}",
                           headers=headers)
        response = connection.getresponse()
        if response.status not in (200, 206) or (got and response.status != 206):
            reason = response.read(512).decode("utf-8", "replace")
            raise FetchError(f"{_where(endpoint, os.path.join(root, relative))}: "
                             f"{response.status} {reason}", missing=response.status == 404)
        length = int(response.getheader("Content-Length", "-1"))
        with open(partial, "ab") as out:
            while chunk := response.read(CHUNK):
                out.write(chunk)
                got += len(chunk)
                _check_stop(endpoint, relative, stop)
        if length >= 0 and got - _start(response) != length:
            raise http.client.IncompleteRead(b"", length)
        return got, got
    finally:
        connection.close()


def _check_stop(endpoint: DataEndpoint, relative: str, stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise FetchError(f"{_where(endpoint, relative)}: stopped, its attempt was cancelled")


def _start(response: http.client.HTTPResponse) -> int:
    content_range = response.getheader("Content-Range", "")
    if response.status == 206 and content_range.startswith("bytes "):
        return int(content_range[6:].split("-", 1)[0])
    return 0


def _connect(endpoint: DataEndpoint, timeout: float) -> http.client.HTTPConnection:
    url = urlsplit(endpoint.url)
    if url.hostname is None or url.port is None or url.scheme not in ("http", "https"):
        raise FetchError(f"TaskManager {endpoint.taskmanager_id} announced no usable data "
                         f"service address ({endpoint.url!r})")
    if url.scheme == "http":
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
        connection.connect()
        return connection
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # the certificate is pinned by fingerprint instead
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout,
                                             context=context)
    connection.connect()
    der = connection.sock.getpeercert(binary_form=True) if connection.sock else None
    if not der or fingerprint_of(der) != endpoint.fingerprint:
        connection.close()
        raise FetchError(f"TaskManager {endpoint.taskmanager_id} at {endpoint.url} showed a "
                         f"certificate other than the one it registered with")
    return connection


def _where(endpoint: DataEndpoint, path: str) -> str:
    return f"{os.path.basename(path)} from TaskManager {endpoint.taskmanager_id} at {endpoint.url}"

