"""GUI tests leave Qt objects in reference cycles; collect them on the main thread after
each test. Collected later on another thread (a paho network thread of an integration
test in this same process), their destructors deadlock (see gui/collector.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def collect_qt_garbage_on_the_main_thread() -> Iterator[None]:
    yield
    gc.collect()
