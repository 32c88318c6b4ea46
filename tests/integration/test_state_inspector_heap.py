"""The state inspector's cluster test (test_state_inspector.py) on TaskManagers whose
keyed state is in the heap backend: each checkpoint a JSON document per subtask."""

from __future__ import annotations

import pytest

from tests.integration.clusters import SPARK_UP_AND_RESTARTS
from tests.integration.test_state_inspector import (  # noqa: F401  (collected here too)
    test_the_inspector_lists_pages_and_diffs_10000_keys_as_the_job_wrote_them,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster(
    {**SPARK_UP_AND_RESTARTS, "state.backend": "heap"})]
