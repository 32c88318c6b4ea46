"""Which checkpoints the inspector finds of a running job (core/stateinspector/snapshots.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.stateinspector import snapshots
from clusterdeck.core.stateinspector.snapshots import InspectorError, retained_checkpoints


class TurningOver:
    """A running job's checkpoint folder: the first listings meet a subsumed checkpoint
    deleted under them and the next one still in progress, then one completed."""

    def __init__(self, folder: Path, empty_listings: int) -> None:
        self.folder, self.empty_listings, self.root = folder, empty_listings, folder

    def job_folder(self, _job_id: str) -> Path:
        return self.folder

    def completed(self, _job_id: str) -> tuple[list[str], list[str]]:
        if self.empty_listings:
            self.empty_listings -= 1
            return [], ["checkpoint 156 of job j never completed (no metadata)"]
        return ["checkpoint 157"], []


def test_a_listing_that_met_the_checkpoints_turning_over_is_taken_again(tmp_path: Path,
                                                                        monkeypatch) -> None:
    monkeypatch.setattr(snapshots.time, "sleep", lambda _seconds: None)
    assert retained_checkpoints(TurningOver(tmp_path, 2), "j") == ["checkpoint 157"]


def test_a_job_whose_checkpoints_never_complete_says_why(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(snapshots.time, "sleep", lambda _seconds: None)
    with pytest.raises(InspectorError, match=r"no completed checkpoint .*156 .* never "
                                             r"completed"):
        retained_checkpoints(TurningOver(tmp_path, 1000), "j")
