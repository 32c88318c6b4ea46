"""Which machine a process is on, as far as its files go: the host that input splits of
local files are bound to (the JobManager's), and that a TaskManager names when it asks
for a split.

A host name alone does not say it: containers, and a TaskManager in a mount namespace of
its own, often share the JobManager's host name but not its files, and would be given
local files they cannot see. The identity is the host name (to read) and a digest of the
machine's id (``/etc/machine-id``, else the boot id) and the process's mount namespace:
processes that see the same mounts of the same running machine share it, and a
supervisor's children share their supervisor's. Elsewhere than Linux it is the host name.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket

_MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id",
                     "/proc/sys/kernel/random/boot_id")


@functools.cache
def host_identity() -> str:
    """``<host name>/<12 hex digits>``, or the host name where nothing tells more."""
    name = socket.gethostname()
    machine = _first_readable(_MACHINE_ID_FILES)
    try:
        mounts = os.readlink("/proc/self/ns/mnt")
    except OSError:
        mounts = ""
    if not machine and not mounts:
        return name
    digest = hashlib.sha256(f"{machine}\n{mounts}".encode()).hexdigest()[:12]
    return f"{name}/{digest}"


def _first_readable(paths: tuple[str, ...]) -> str:
    for path in paths:
        try:
            with open(path, encoding="ascii") as file:
                text = file.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            return text
    return ""
