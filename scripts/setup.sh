#!/usr/bin/env bash
# Installs what clusterdeck needs into ./.venv, and Eclipse Mosquitto through apt-get
# where that is possible. Without Mosquitto the embedded amqtt broker is used.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "setup: installing mosquitto with apt-get" >&2
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto >/dev/null) \
            || echo "setup: mosquitto could not be installed; the embedded amqtt broker will be used" >&2
    else
        echo "setup: mosquitto is not installed and apt-get is not usable here; using amqtt" >&2
    fi
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
