#!/usr/bin/env bash
# Installs what clusterdeck needs into ./.venv, and, through apt-get where that is possible
# (Debian or Ubuntu, as root), the system packages it uses:
#   - Eclipse Mosquitto (without it the embedded amqtt broker is used);
#   - the X11/xcb libraries Qt's window needs (`clusterdeck gui`; tests run offscreen),
#     and Xvfb for a window on a machine without a display;
#   - desktop-file-utils, to check the desktop entry (packaging/);
#   - iproute2 and nftables, for the integration tests' bridged machines.
# Nothing here is fatal but the virtualenv: a package apt-get cannot install is named, and
# the part that needs it says so when it is used.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
    mosquitto
    zookeeper  # the local ZooKeeper of `clusterdeck up --ha zookeeper` (docs/ha.md)
    desktop-file-utils
    # Qt 6's xcb platform plugin: https://doc.qt.io/qt-6/linux-requirements.html
    libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
    libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libxcb-util1
    libxkbcommon0 libxkbcommon-x11-0 libx11-xcb1 libegl1 libgl1 libfontconfig1
    libdbus-1-3 libglib2.0-0
    # a virtual display, for `xvfb-run clusterdeck gui` on a machine without one
    xvfb
    # the session bus desktop notifications travel on (the tests start their own)
    dbus-daemon
    # machines on a bridge for the network tests (tests/integration/netns.py): ip, nft
    iproute2 nftables
)

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
    for package in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$package")
    done
fi
if [ ${#missing[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "setup: installing with apt-get: ${missing[*]}" >&2
        if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null); then
            # One at a time, so a name this release lacks does not stop the others.
            for package in "${missing[@]}"; do
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                    "$package" >/dev/null 2>&1 \
                    || echo "setup: apt-get could not install $package" >&2
            done
        fi
    else
        echo "setup: not installed, and apt-get is not usable here (needs root):" \
             "${missing[*]}" >&2
        echo "setup: without mosquitto the embedded amqtt broker is used; without the" \
             "libraries 'clusterdeck gui' names what is missing" >&2
    fi
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
