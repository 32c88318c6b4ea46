"""Shared by every test: an isolated clusterdeck home, and no display."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test away from the user's own clusterdeck folders."""
    if "CLUSTERDECK_HOME" not in os.environ or os.environ.get("CLUSTERDECK_TEST_HOME"):
        home = tmp_path_factory.mktemp("home")
        monkeypatch.setenv("CLUSTERDECK_HOME", str(home))
        monkeypatch.setenv("CLUSTERDECK_TEST_HOME", "1")
