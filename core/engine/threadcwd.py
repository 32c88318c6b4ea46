"""A working directory of the calling thread's own, for a PySpark script on a slot thread.

``spark-submit script.py`` runs the script in the submitter's working directory, so its
relative paths (``open("data/x.txt")``) resolve there. A TaskManager runs several scripts
at once, one per slot thread, in one process, and ``os.chdir`` moves the whole process:
every other slot, and the TaskManager itself, would follow.

On Linux the working directory lives in a thread's ``fs_struct``, which threads share
only because ``pthread_create`` asks for it (``CLONE_FS``). ``unshare(CLONE_FS)`` gives
the calling thread its own copy, with no privilege needed: from then on ``chdir`` on that
thread moves that thread only, and the threads and processes it starts. Every relative
path it then opens — ``open``, ``pathlib``, ``os.listdir``, pandas, a subprocess — resolves
against it, as the kernel does the resolving. Samba's per-thread working directories
rest on the same call.

Where there is no ``unshare`` (macOS, Windows) or a seccomp filter refuses it,
``ThreadCwdUnavailable`` says so and the thread keeps the process's directory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

CLONE_FS = 0x00000200  # linux/sched.h


class ThreadCwdUnavailable(OSError):
    """This platform or sandbox cannot give a thread a working directory of its own."""


@contextmanager
def thread_working_directory(folder: str) -> Iterator[None]:
    """While inside, the calling thread (only) works in ``folder``; afterwards it is back
    in the directory it had. Enter and leave on the same thread. Raises
    ThreadCwdUnavailable, or OSError when ``folder`` cannot be entered."""
    _unshare_working_directory()
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        # The thread stays unshared, but back where the process is: a slot thread that
        # goes on after the script sees what the rest of the TaskManager sees.
        os.chdir(before)


def _unshare_working_directory() -> None:
    if not sys.platform.startswith("linux"):
        raise ThreadCwdUnavailable(f"no per-thread working directory on {sys.platform}")
    unshare = _libc_unshare()
    if unshare is None:
        raise ThreadCwdUnavailable("the C library has no unshare()")
    if unshare(CLONE_FS) != 0:
        errno = ctypes.get_errno()
        raise ThreadCwdUnavailable(errno, f"unshare(CLONE_FS) failed: {os.strerror(errno)}")


@cache
def _libc_unshare() -> Callable[[int], int] | None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    unshare = getattr(libc, "unshare", None)
    if unshare is not None:
        unshare.argtypes = [ctypes.c_int]
        unshare.restype = ctypes.c_int
    return unshare
