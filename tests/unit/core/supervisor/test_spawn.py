"""A spawned child learns how often it was restarted (a TaskManager then starts Spark lazily)."""

from __future__ import annotations

import sys

import pytest

from clusterdeck.core.supervisor import RESTARTS_ENV, ProcessSpec
from clusterdeck.core.supervisor._spawn import spawn

pytestmark = pytest.mark.integration  # a child process

PRINT = f"import os; print(os.environ['{RESTARTS_ENV}'], os.environ.get('EXTRA', '-'))"


def output_of(spec: ProcessSpec, restarts: int) -> str:
    popen = spawn(spec, restarts)
    assert popen.stdout is not None
    out = popen.stdout.read().decode().strip()
    assert popen.wait(timeout=30) == 0
    return out


def test_the_child_sees_its_restart_count_next_to_its_own_environment() -> None:
    spec = ProcessSpec("child", "test", (sys.executable, "-c", PRINT), env={"EXTRA": "yes"})
    assert output_of(spec, 0) == "0 yes"
    assert output_of(ProcessSpec("child", "test", (sys.executable, "-c", PRINT)), 3) == "3 -"
