#!/usr/bin/env bash
# Runs a built bundle headless, from a folder that is not the bundle's, with its state in
# a throw-away CLUSTERDECK_HOME, and checks what a user would do first:
#
#   1. --version
#   2. up (embedded amqtt broker, 1 TaskManager) in the background; status --json until
#      the TaskManager is registered
#   3. submit examples/pi.py -- 2 1000 (a PySpark script: Java, Spark and the bundle as
#      Spark's Python worker)
#   4. SIGINT to up; it stops, and no process of the cluster is left (checked by the
#      CLUSTERDECK_HOME in every process's environment: children, java, Python workers)
#   5. up --check with Mosquitto (when installed: the bundle's libraries must not leak
#      into it)
#   6. the GUI under offscreen Qt: it starts a local cluster from its window (gui
#      --start), the TaskManager registers, SIGTERM stops it all; and a plain `gui`
#      stays up until `timeout` ends it
#   7. nothing was written into the bundle's folder
#
#   bash packaging/smoke.sh [BUNDLE_DIR]    (default: the one build.sh builds)
# Prints "smoke: N passed, 0 failed" at the end; exits non-zero on the first failure.
set -euo pipefail

bundle="${1:-${CLUSTERDECK_BUILD_DIR:-${TMPDIR:-/tmp}/clusterdeck-build}/dist/clusterdeck}"
bundle="$(cd "$bundle" && pwd)"
exe="$bundle/clusterdeck"
[ -x "$exe" ] || { echo "smoke: no bundle at $bundle (run packaging/build.sh)" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/clusterdeck-smoke.XXXXXX")"
export CLUSTERDECK_HOME="$work/home"
mkdir -p "$CLUSTERDECK_HOME"
export XDG_CONFIG_HOME="$work/config"   # the GUI's QSettings file (gui.ini) goes there too
unset PYSPARK_PYTHON SPARK_HOME 2>/dev/null || true
cd "$work"          # anywhere but the bundle
passed=0
start=$(date +%s)
up_pid=""
gui_pid=""

say() { echo "smoke [$(( $(date +%s) - start )) s]: $*" >&2; }
ok() { passed=$((passed + 1)); say "ok: $*"; }
fail() {
    say "FAILED: $*"
    for log in "$work"/*.log "$CLUSTERDECK_HOME"/logs/*/*.log; do
        [ -f "$log" ] && { echo "----- $log (tail)" >&2; tail -n 25 "$log" >&2; }
    done
    echo "smoke: $passed passed, 1 failed" >&2
    exit 1
}
# Every live process whose environment carries this smoke run's CLUSTERDECK_HOME.
leftovers() {
    local dir pid found=""
    for dir in /proc/[0-9]*; do
        pid="${dir#/proc/}"
        [ "$pid" = "$$" ] && continue
        if { tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null \
                | grep -qxF "CLUSTERDECK_HOME=$CLUSTERDECK_HOME"; then
            found="$found $pid"
        fi
    done
    echo "$found"
}
# Wait until no process of this run is left (a few seconds for the stragglers).
no_leftovers() {
    local left
    for _ in $(seq 1 40); do
        left="$(leftovers)"
        [ -z "$left" ] && return 0
        sleep 0.5
    done
    ps -o pid,ppid,args -p "${left// /,}" >&2 || true
    return 1
}
cleanup() {
    for pid in $up_pid $gui_pid; do kill -TERM "$pid" 2>/dev/null || true; done
    sleep 1
    for pid in $(leftovers); do kill -KILL "$pid" 2>/dev/null || true; done
    [ -n "${KEEP_SMOKE:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
# status --json until N TaskManagers are registered in cluster $1.
wait_registered() {
    local cluster="$1" count="$2" deadline=$(( $(date +%s) + $3 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        if "$exe" status --json --cluster "$cluster" > "$work/status.json" 2>/dev/null \
                && [ "$(grep -c '"state": "registered"' "$work/status.json")" -ge "$count" ]; then
            return 0
        fi
        sleep 1
    done
    return 1
}

before="$(cd "$bundle" && find . -printf '%p %s\n' | sort | md5sum)"

# 1
version="$("$exe" --version)" || fail "--version"
[[ "$version" == clusterdeck\ * ]] || fail "--version printed '$version'"
ok "--version: $version"

# 2
"$exe" up --cluster smoke --taskmanagers 1 --slots 2 --broker amqtt > "$work/up.log" 2>&1 &
up_pid=$!
wait_registered smoke 1 120 || fail "up: no TaskManager registered within 120 s"
ok "up: TaskManager registered (status --json)"
"$exe" status --json --cluster smoke >&2 || fail "status --json"
ok "status --json"

# 3
"$exe" submit --cluster smoke "$bundle/examples/pi.py" -- 2 1000 > "$work/submit.log" 2>&1 \
    || fail "submit examples/pi.py exited $?"
grep -q "Pi is roughly" "$work/submit.log" || fail "submit: no 'Pi is roughly' in the output"
ok "submit examples/pi.py -- 2 1000: $(grep -o 'Pi is roughly [0-9.]*' "$work/submit.log")"

# 4
kill -INT "$up_pid"
for _ in $(seq 1 60); do kill -0 "$up_pid" 2>/dev/null || break; sleep 0.5; done
kill -0 "$up_pid" 2>/dev/null && fail "up still running 30 s after SIGINT"
up_status=0; wait "$up_pid" || up_status=$?
up_pid=""
[ "$up_status" = 0 ] || fail "up exited $up_status after SIGINT"
no_leftovers || fail "processes left after up stopped"
ok "SIGINT stopped up (exit 0), no process left"

# 5
if command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ]; then
    "$exe" up --check --cluster smoke-mosquitto --taskmanagers 1 --broker mosquitto \
        -D spark.start=lazy > "$work/mosquitto.log" 2>&1 || fail "up --check with Mosquitto"
    no_leftovers || fail "processes left after up --check"
    ok "up --check --broker mosquitto"
else
    say "skipped: Mosquitto is not installed"
fi

# 6
QT_QPA_PLATFORM=offscreen "$exe" gui --start -D taskmanager.count=1 -D broker.kind=amqtt \
    -D spark.start=lazy > "$work/gui-start.log" 2>&1 &
gui_pid=$!
wait_registered default 1 120 || fail "gui --start: no TaskManager registered within 120 s"
kill -0 "$gui_pid" 2>/dev/null || fail "gui --start exited early"
kill -TERM "$gui_pid"
for _ in $(seq 1 60); do kill -0 "$gui_pid" 2>/dev/null || break; sleep 0.5; done
kill -0 "$gui_pid" 2>/dev/null && fail "gui still running 30 s after SIGTERM"
gui_pid=""
no_leftovers || fail "processes left after the GUI stopped"
ok "gui --start (offscreen): cluster up from the window, SIGTERM stopped everything"

gui_status=0
QT_QPA_PLATFORM=offscreen timeout 6 "$exe" gui > "$work/gui.log" 2>&1 || gui_status=$?
[ "$gui_status" = 124 ] || fail "gui exited $gui_status before the 6 s timeout"
ok "gui (offscreen) stayed up 6 s"

# 7
after="$(cd "$bundle" && find . -printf '%p %s\n' | sort | md5sum)"
[ "$before" = "$after" ] || fail "something was written into $bundle"
ok "nothing written into the bundle's folder"

say "done"
echo "smoke: $passed passed, 0 failed"
