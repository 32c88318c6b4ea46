"""A host identity is shared by the processes of one machine's mounts, not by one that
only has the same host name."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest

from clusterdeck.core.node.hostidentity import host_identity

PRINT_IT = ("from clusterdeck.core.node.hostidentity import host_identity; "
            "print(host_identity())")


def test_it_starts_with_the_host_name_and_a_child_shares_it() -> None:
    assert host_identity().split("/")[0] == socket.gethostname()
    child = subprocess.run([sys.executable, "-c", PRINT_IT], capture_output=True, text=True,
                           timeout=60, check=True)
    assert child.stdout.strip() == host_identity()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a mount namespace needs root and unshare")
def test_a_process_in_a_mount_namespace_of_its_own_is_another_host() -> None:
    other = subprocess.run(["unshare", "--mount", sys.executable, "-c", PRINT_IT],
                           capture_output=True, text=True, timeout=60, check=True)
    name, _, digest = other.stdout.strip().partition("/")
    assert name == socket.gethostname() and digest
    assert other.stdout.strip() != host_identity()
