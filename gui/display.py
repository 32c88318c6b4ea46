"""Can this machine open the window? Asked before Qt is, because Qt's answer is to abort.

Without a display, or with the xcb platform plugin missing one of its libraries, creating a
QApplication prints "could not load the Qt platform plugin" and aborts the process.
``display_problem`` finds both cases first and says what is missing and how to get it.
It imports no Qt module that loads a platform plugin, only PySide6's folder to find it.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# Library file -> the Debian/Ubuntu package that ships it (Qt 6's X11 requirements).
DEBIAN_PACKAGES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
}
# Loaded by the plugin at run time (dlopen), so ldd does not list it.
_DLOPENED = {"xcb-cursor": "libxcb-cursor.so.0"}

NO_DISPLAY = ("no display to open the window on: neither DISPLAY nor WAYLAND_DISPLAY is "
              "set. Run it in a desktop session, under a virtual display "
              "(xvfb-run clusterdeck gui), or offscreen (QT_QPA_PLATFORM=offscreen); "
              "`clusterdeck up` runs a cluster without a window.")


def display_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """None when the window can open, else what is missing and how to get it."""
    environ = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return None
    platform = environ.get("QT_QPA_PLATFORM", "")
    if platform and not platform.startswith("xcb"):
        return None  # offscreen, wayland, vnc...: the user chose; Qt will say if it fails
    if not platform and environ.get("WAYLAND_DISPLAY"):
        return None
    if not environ.get("DISPLAY"):
        return NO_DISPLAY
    missing = missing_xcb_libraries()
    if not missing:
        return None
    packages = sorted({DEBIAN_PACKAGES[name] for name in missing if name in DEBIAN_PACKAGES})
    how = (f"On Debian or Ubuntu: sudo apt-get install {' '.join(packages)} (bash "
           "scripts/setup.sh does it when run as root)." if packages else
           "Install them with your system's package manager.")
    return (f"Qt's xcb platform plugin cannot load: {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing. {how}")


def missing_xcb_libraries() -> list[str]:
    """The libraries the xcb plugin links to that the dynamic loader cannot find."""
    missing = [name for key, name in _DLOPENED.items() if ctypes.util.find_library(key) is None]
    plugin = _xcb_plugin()
    if plugin is None:
        return missing
    try:
        done = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return missing  # no ldd: Qt will tell, we cannot
    for line in done.stdout.splitlines():
        name, _, where = line.strip().partition(" => ")
        if where.strip() == "not found" and name not in missing:
            missing.append(name)
    return missing


def _xcb_plugin() -> Path | None:
    import PySide6  # the package folder only; no Qt library is loaded by this import

    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None
