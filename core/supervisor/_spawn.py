"""Starting and signalling one child so that it never outlives the supervisor.

Each child asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``, Linux;
nothing elsewhere). The kernel's "parent" is the *thread* that forked, so the supervisor
spawns every child from its one long-lived thread. Each child also leads its own session
and process group: Ctrl-C in a terminal reaches only the supervisor, which then stops the
children in order, and a whole group can be signalled at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable

from clusterdeck.core.supervisor._process import ProcessSpec

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Resolved here, in the parent: between fork and exec the child must not load libraries.
_PRCTL = _load_prctl()
_SIGKILL = int(signal.SIGKILL)


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec_fn that makes the child die with the spawning thread, or None."""
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def die_with_parent() -> None:  # runs in the forked child, before exec
        prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before the request took effect
            os._exit(1)

    return die_with_parent


RESTARTS_ENV = "CLUSTERDECK_RESTARTS"  # set in every child: restarts before this start


def spawn(spec: ProcessSpec, restarts: int = 0) -> subprocess.Popen[bytes]:
    """Start ``spec`` with stdout and stderr merged into one pipe (``popen.stdout``). The
    child finds in $CLUSTERDECK_RESTARTS how often it was restarted after a crash.

    Call it on the supervisor's long-lived thread only (see the module docstring).
    Raises OSError or subprocess.SubprocessError when the process cannot be started.
    """
    env = {**os.environ, **(spec.env or {}), RESTARTS_ENV: str(restarts)}
    return subprocess.Popen(
        spec.argv,
        cwd=spec.cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent_hook(),
    )


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group led by ``pid``: the child and whatever it started
    without leaving its group. A group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def describe_exit(code: int) -> str:
    """``-9`` as ``signal SIGKILL``, ``1`` as ``code 1``: for the log's supervisor lines."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"
