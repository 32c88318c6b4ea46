"""Whether the window can open is asked before Qt is (Qt's answer is to abort)."""

from __future__ import annotations

import subprocess

from clusterdeck.gui import display

LDD = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f)
"""


def test_no_display_is_named_with_the_ways_to_get_one() -> None:
    problem = display.display_problem({})
    assert problem == display.NO_DISPLAY


def test_a_chosen_platform_or_wayland_is_left_to_qt() -> None:
    assert display.display_problem({"QT_QPA_PLATFORM": "offscreen"}) is None
    assert display.display_problem({"WAYLAND_DISPLAY": "wayland-0"}) is None


def test_missing_xcb_libraries_are_named_with_their_debian_packages(monkeypatch) -> None:
    monkeypatch.setattr(display.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout=LDD, stderr=""))
    monkeypatch.setattr(display.ctypes.util, "find_library", lambda name: None)
    problem = display.display_problem({"DISPLAY": ":0"})
    assert problem is not None
    assert "libxcb-cursor.so.0, libxcb-icccm.so.4, libxcb-keysyms.so.1 are missing" in problem
    assert "sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1" in problem


def test_a_display_with_every_library_is_fine(monkeypatch) -> None:
    monkeypatch.setattr(display, "missing_xcb_libraries", lambda: [])
    assert display.display_problem({"DISPLAY": ":0"}) is None
