"""A TaskManager's data service: its attempts' files, over HTTP with range requests.

``GET /v1/file?root=<job work dir>&path=<path under it>`` with ``Authorization: Bearer
<capability>`` answers the file (``200``) or the asked range (``206``, one range of the
``Range: bytes=`` forms); ``HEAD`` the same without the body. Only files under the
folders tasks write (``SERVED_FOLDERS``) of a root the capability was made for are
served; anything else is ``403``, a missing file ``404``, a malformed request ``400``.

Requests are served on threads of their own, at most ``max_connections`` at once (the
accept loop waits for a free one, so a burst queues in the listen backlog instead of
growing threads). The TLS handshake, when on, happens on the request's thread with its
timeout, so a client that never finishes one holds only its own thread. Nothing here
touches the TaskExecutor's state: a capability is checked by recomputing it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from clusterdeck.core.dataservice import capability, selfsigned
from clusterdeck.core.protocol import workdir

log = logging.getLogger(__name__)

SERVED_FOLDERS = workdir.TASK_FOLDERS
FILE_ROUTE = "/v1/file"
MAX_QUERY = 8192
REQUEST_TIMEOUT = 30.0
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


@dataclass(frozen=True)
class DataServiceAddress:
    """Where a started data service is: what the TaskManager announces."""

    url: str
    fingerprint: str  # "" for plain HTTP (loopback)


class DataServer:
    """The file server; ``start`` binds and serves on a daemon thread, ``stop`` ends it."""

    def __init__(self, key: str, *, max_connections: int = 16,
                 locate: Callable[[str], str] = str) -> None:
        """``locate``: where this machine keeps a job work dir that the capabilities and
        requests name by the JobManager's path (itself, unless it could not be made)."""
        self.key = key
        self.locate = locate
        self._slots = threading.BoundedSemaphore(max_connections)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, bind: str, advertised_host: str, tls_folder: Path | None,
              port: int = 0, certificate: selfsigned.SelfSigned | None = None
              ) -> DataServiceAddress:
        """TLS with ``certificate``, or one made in ``tls_folder``; neither: plain HTTP."""
        httpd = _Server((bind, port), _Handler, self)
        fingerprint = ""
        if tls_folder is not None or certificate is not None:
            made = certificate or selfsigned.make(tls_folder, advertised_host)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(made.cert_file, made.key_file)
            httpd.socket = context.wrap_socket(httpd.socket, server_side=True,
                                               do_handshake_on_connect=False)
            fingerprint = made.fingerprint
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="data-service",
                                        kwargs={"poll_interval": 0.5}, daemon=True)
        self._thread.start()
        scheme = "https" if fingerprint else "http"
        host = f"[{advertised_host}]" if ":" in advertised_host else advertised_host
        return DataServiceAddress(f"{scheme}://{host}:{httpd.server_address[1]}",
                                  fingerprint)

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: Any, owner: DataServer) -> None:
        self.owner = owner
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.owner._slots.acquire()  # the accept loop waits: bounded threads
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.owner._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.owner._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("data service: request from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT
    server_version = "clusterdeck-data/1"

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("data service: " + format, *args)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        try:
            path = self._authorised_file()
        except _Refused as refused:
            self._error(refused.status, refused.reason)
            return
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below, after sending
        except FileNotFoundError:
            self._error(HTTPStatus.NOT_FOUND, "no such file")
            return
        except IsADirectoryError:
            self._error(HTTPStatus.FORBIDDEN, "not a file")
            return
        with handle:
            self._send_file(handle, os.fstat(handle.fileno()).st_size, body)

    def _authorised_file(self) -> str:
        split = urlsplit(self.path)
        if split.path != FILE_ROUTE or len(split.query) > MAX_QUERY:
            raise _Refused(HTTPStatus.NOT_FOUND, "no such route")
        query = parse_qs(split.query, strict_parsing=False)
        root, relative = _single(query, "root"), _single(query, "path")
        token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not re.fullmatch(r"[0-9a-f]{64}", token) or not capability.allows(
                self.server.owner.key, root, token):
            raise _Refused(HTTPStatus.FORBIDDEN, "no capability for that folder")
        return served_path(self.server.owner.locate(root), relative)

    def _send_file(self, handle: Any, size: int, body: bool) -> None:
        try:
            start, end = _range(self.headers.get("Range"), size)
        except ValueError:
            self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        partial = self.headers.get("Range") is not None
        self.send_response(HTTPStatus.PARTIAL_CONTENT if partial else HTTPStatus.OK)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        if partial:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if body and end > start:
            self.wfile.flush()
            self.connection.sendfile(handle, start, end - start)

    def _error(self, status: HTTPStatus, reason: str) -> None:
        data = reason.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


class _Refused(Exception):
    def __init__(self, status: HTTPStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _single(query: dict[str, list[str]], name: str) -> str:
    values = query.get(name, [])
    if len(values) != 1 or not values[0]:
        raise _Refused(HTTPStatus.BAD_REQUEST, f"give exactly one {name}")
    return values[0]


def served_path(root: str, relative: str) -> str:
    """The file ``relative`` names under ``root``, if the service may serve it: under one
    of ``SERVED_FOLDERS``, no ``..``, no way out through a symbolic link."""
    parts = relative.split("/")
    if (not os.path.isabs(root) or relative.startswith("/") or "\x00" in root + relative
            or any(part in ("", ".", "..") for part in parts)
            or parts[0] not in SERVED_FOLDERS or len(parts) < 2):
        raise _Refused(HTTPStatus.FORBIDDEN, "not a served path")
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(real_root, *parts))
    if not real.startswith(os.path.join(real_root, parts[0]) + os.sep):
        raise _Refused(HTTPStatus.FORBIDDEN, "not a served path")
    return real


def _range(header: str | None, size: int) -> tuple[int, int]:
    """[start, end) of one ``bytes=`` range of a file of ``size`` bytes (all without one)."""
    if header is None:
        return 0, size
    match = _RANGE.fullmatch(header.strip())
    if match is None or match.group(1) == match.group(2) == "":
        raise ValueError(header)
    first, last = match.group(1), match.group(2)
    if first == "":  # the last N bytes
        return max(0, size - int(last)), size
    start = int(first)
    end = size if last == "" else min(size, int(last) + 1)
    if start >= size or start > end:
        raise ValueError(header)
    return start, end
