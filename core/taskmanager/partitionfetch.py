"""Bringing a consumer's input partitions here from the TaskManagers that wrote them.

A partition its consumer cannot see on this machine's disk (the producer ran on another
machine) is fetched from the producer TaskManager's data service (core/dataservice) into
the same path here, so it is then read like any local one. The completion marker comes
last: a copy broken half way is never taken for the partition, and the next attempt
fetches again. Partitions are fetched a few at a time, on the slot thread's own pool.

The slot thread waits for them in steps of ``CANCEL_CHECK``: once its attempt is
cancelled (by its JobMaster, or by its TaskManager cut off from the JobManager) it ends
at once with TaskCanceled, and the fetches still under way stop at their next chunk, or
within the data service's stall timeout when a read is blocked on a silent peer
(core/dataservice/client.py).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait

from clusterdeck.core.dataservice.client import DEFAULT_TIMEOUT, FetchError, fetch_file
from clusterdeck.core.engine.exchange import (
    COMPLETE_FILE,
    SCHEMA_FILE,
    FetchMissing,
    InputPartition,
    Unfetched,
)
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.wiring import DataEndpoint
from clusterdeck.core.taskmanager.tasks import TaskCanceled

PARALLEL_FETCHES = 4
MAX_FILES = 100_000  # data files one partition's marker may list
CANCEL_CHECK = 0.2  # seconds between two looks at the attempt's cancel while fetching


def fetcher(deployment: p.SubmitTask, kept: str, canceled: threading.Event,
            timeout: float = DEFAULT_TIMEOUT) -> FetchMissing:
    """What fetches this deployment's missing partitions into ``kept`` (the job's work dir
    here, core/taskmanager/jobfolders.py); answers why, for each that it could not, and
    raises TaskCanceled as soon as ``canceled`` (the attempt's) is set. ``timeout``: how
    long a connect or a read may stall (core/dataservice/client.py)."""
    endpoints = {e.taskmanager_id: e for e in deployment.data_endpoints}

    def fetch_missing(partitions: Sequence[InputPartition]
                      ) -> dict[InputPartition, Unfetched]:
        pool = ThreadPoolExecutor(PARALLEL_FETCHES, thread_name_prefix="fetch")
        unanswered: set[str] = set()  # added to by the fetch threads (one add is atomic)
        try:
            futures = [pool.submit(_fetch, endpoints.get(
                partition.producer.taskmanager_id or ""), deployment.work_dir, kept,
                partition, canceled, unanswered, timeout) for partition in partitions]
            pending = set(futures)
            while pending:
                if canceled.is_set():
                    raise TaskCanceled(deployment.attempt_id)
                _, pending = wait(pending, CANCEL_CHECK)
            pairs = zip(partitions, (future.result() for future in futures), strict=True)
            return {partition: why for partition, why in pairs if why is not None}
        finally:  # never waits: a cancelled attempt's fetches end on their own
            pool.shutdown(wait=False, cancel_futures=True)
    return fetch_missing


def _fetch(endpoint: DataEndpoint | None, root: str, kept: str, partition: InputPartition,
           canceled: threading.Event, unanswered: set[str],
           timeout: float = DEFAULT_TIMEOUT) -> Unfetched | None:
    """None once the partition is here, else why not. ``partition.path`` is under ``kept``,
    the producer's TaskManager knows it under ``root``. A TaskManager that did not
    answer one fetch (``unanswered``) is not asked for the next ones: on a silent peer
    the partitions in the pool's queue would each wait out the stall timeout again."""
    if endpoint is None:
        return Unfetched(f"nowhere to fetch it from: its TaskManager "
                         f"{partition.producer.taskmanager_id} is this one or announced no "
                         f"data service")
    if endpoint.taskmanager_id in unanswered:
        return Unfetched(f"not fetched: its TaskManager {endpoint.taskmanager_id} did not "
                         f"answer a fetch of another partition", unanswered=True)
    try:
        mirror_partition(endpoint, root,
                         os.path.join(root, os.path.relpath(partition.path, kept)), kept,
                         stop=canceled, timeout=timeout)
    except FetchError as error:
        if error.unanswered:
            unanswered.add(endpoint.taskmanager_id)
        return Unfetched(f"fetching it failed: {error}", unanswered=error.unanswered)
    except (OSError, ValueError) as error:
        return Unfetched(f"fetching it failed: {error}")
    return None


def mirror_partition(endpoint: DataEndpoint, root: str, path: str,
                     local_root: str | None = None, *,
                     stop: threading.Event | None = None,
                     timeout: float = DEFAULT_TIMEOUT) -> None:
    """Copy the complete result partition at ``path`` (marker last) from ``endpoint``,
    to the same path here (under ``local_root`` in place of ``root`` when given). Two
    slots may mirror one partition at once (a broadcast edge): every file lands whole by
    a rename, so the second copy only replaces the first with the same bytes. ``stop``
    set: FetchError at the next chunk (see ``fetch_file``)."""
    here = os.path.join(local_root, os.path.relpath(path, root)) if local_root else path
    os.makedirs(here, exist_ok=True)
    handle, incoming = tempfile.mkstemp(".fetched", f".{COMPLETE_FILE}.", here)
    os.close(handle)
    try:
        fetch_file(endpoint, root, os.path.join(path, COMPLETE_FILE), incoming, stop=stop,
                   timeout=timeout)
        with open(incoming, encoding="utf-8") as marker:  # the marker goes in place last
            names = _data_file_names(json.load(marker))
        for name in names:
            if not os.path.isfile(os.path.join(here, name)):
                fetch_file(endpoint, root, os.path.join(path, name), os.path.join(here, name),
                           stop=stop, timeout=timeout)
        _mirror_schema(endpoint, root, path, here, stop, timeout)
        os.replace(incoming, os.path.join(here, COMPLETE_FILE))
    finally:
        if os.path.exists(incoming):
            os.unlink(incoming)


def _mirror_schema(endpoint: DataEndpoint, root: str, path: str, here: str,
                   stop: threading.Event | None, timeout: float) -> None:
    """The producer edge's schema, beside the partition folders, unless already here (an
    edge whose producer wrote no records may have none)."""
    schema_here = os.path.join(os.path.dirname(os.path.normpath(here)), SCHEMA_FILE)
    if os.path.isfile(schema_here):
        return
    edge_folder = os.path.dirname(os.path.normpath(path))
    try:
        fetch_file(endpoint, root, os.path.join(edge_folder, SCHEMA_FILE), schema_here,
                   stop=stop, timeout=timeout)
    except FetchError as error:
        if not error.missing:
            raise


def _data_file_names(marker: object) -> list[str]:
    """The marker's file names, refused unless each is a plain name in the folder."""
    names = marker.get("files") if isinstance(marker, dict) else None
    if not isinstance(names, list) or len(names) > MAX_FILES or not all(
            isinstance(n, str) and n and "/" not in n and n not in (".", "..")
            and not n.startswith(".") and "\x00" not in n for n in names):
        raise ValueError("its completion marker is malformed")
    return names
