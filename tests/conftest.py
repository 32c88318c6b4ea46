"""Shared by every test: one isolated clusterdeck home for the session, and no display.

The home is set once, before any fixture runs: a cluster started by a module fixture
restarts its processes with the environment of that moment, so it must never change.
``CLUSTERDECK_TEST_KEEP_HOME=1`` keeps it (with the clusters' logs) after the session.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

os.environ["QT_QPA_PLATFORM"] = "offscreen"
_home = tempfile.mkdtemp(prefix="clusterdeck-test-home-")
os.environ["CLUSTERDECK_HOME"] = _home
if os.environ.get("CLUSTERDECK_TEST_KEEP_HOME") != "1":  # 1: keep its logs to read
    atexit.register(shutil.rmtree, _home, True)
