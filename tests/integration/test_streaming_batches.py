"""A streaming job with batch functions (``map_batches``, records and Arrow) on a real
cluster: its keyed window counts committed exactly, as the per-record job's."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, wait_result
from tests.integration.test_streaming import committed, staged, windows_expected

pytestmark = [pytest.mark.integration, pytest.mark.cluster(SPARK_UP_AND_RESTARTS)]
BATCHES = Path(__file__).resolve().parents[2] / "examples" / "streaming_batches.py"


def test_batch_functions_before_and_after_a_window_commit_exactly_its_counts(
        client, tmp_path) -> None:
    out = tmp_path / "out"
    job_id = client.submit(BATCHES, (str(out), "2000", "1000"))
    result = wait_result(client, job_id, 120)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert committed(out) == windows_expected(2000)
    assert staged(out) == []
