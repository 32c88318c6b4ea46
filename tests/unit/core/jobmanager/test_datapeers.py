"""The JobMaster's view of its TaskManagers' data services."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.dataservice import capability
from clusterdeck.core.dataservice.client import FetchError
from clusterdeck.core.jobmanager.datapeers import DataPeers, fetch_unseen
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import ShipStrategy
from clusterdeck.core.protocol.wiring import EdgeInput, ResultPartitionRef


def offer(tm: str, key: str = "", url: str = "http://127.0.0.1:1") -> p.OfferSlot:
    return p.OfferSlot("alloc", tm, f"taskexecutor.{tm}", "host", 0, url, "", key)


def test_a_consumer_gets_one_endpoint_per_other_producer_taskmanager() -> None:
    peers = DataPeers("/jobs/j1")
    keys = {tm: capability.new_key() for tm in ("taskmanager-1", "taskmanager-2")}
    for tm, key in keys.items():
        peers.offered(offer(tm, key))
    peers.offered(offer("taskmanager-3"))  # announced no data service
    refs = tuple(ResultPartitionRef(f"a{i}", "v1", i, 0, tm) for i, tm in enumerate(
        ["taskmanager-1", "taskmanager-2", "taskmanager-2", "taskmanager-3", None]))
    endpoints = peers.for_inputs([EdgeInput(0, "v1", ShipStrategy.HASH, refs)],
                                 consumer="taskmanager-1")
    assert [e.taskmanager_id for e in endpoints] == ["taskmanager-2"]
    assert capability.allows(keys["taskmanager-2"], "/jobs/j1", endpoints[0].capability)
    assert not capability.allows(keys["taskmanager-2"], "/jobs/j2", endpoints[0].capability)


def test_files_already_here_are_not_fetched_and_missing_ones_say_why(tmp_path: Path) -> None:
    here = tmp_path / "collect" / "a.json"
    here.parent.mkdir()
    here.write_text("[]")
    fetch_unseen([str(here)], None, str(tmp_path))  # nothing to do, no endpoint needed
    with pytest.raises(FetchError, match="announced no data service"):
        fetch_unseen([str(tmp_path / "collect" / "b.json")], None, str(tmp_path))
