"""``clusterdeck recorder``: the cluster's flight recorder, a process of its own.

Started by the local cluster's supervisor next to the JobManager; it reads the whole
broker with the read-only observer login and the processes' log files from the
cluster's log folder, and writes the cluster's recording (docs/recorder.md).
"""

from __future__ import annotations

import logging
import signal
import threading

from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.node import exitcodes
from clusterdeck.core.node.service import broker_address, connect_service, setup_logging
from clusterdeck.core.recorder.logtail import LogTail
from clusterdeck.core.recorder.recorder import POSITIONS_KEY, Recorder, saved_positions
from clusterdeck.core.recorder.store import FILE_NAME, RecordingStore

log = logging.getLogger(__name__)


def run_recorder(config: Config) -> int:
    setup_logging("recorder")
    cluster_id = config["cluster.id"]
    store = RecordingStore(paths.cluster_dir(cluster_id) / FILE_NAME, cluster_id,
                           max_bytes=config["recorder.max-size"],
                           max_age=config["recorder.max-age"])
    tail = LogTail(paths.cluster_log_dir(cluster_id), saved_positions(
        store.meta(POSITIONS_KEY)))
    recorder = Recorder(store, tail)
    service = connect_service(config, "observer", "observer-recorder",
                              broker_address(config, "observer"), with_presence=False,
                              identity="observer")
    recorder.start()
    service.follow_raw(recorder.received)
    log.info("recording cluster %s into %s", cluster_id, store.path)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        if not recorder.writing:
            service.close()
            return exitcodes.FAILED
    service.close()
    recorder.stop()
    return exitcodes.OK
