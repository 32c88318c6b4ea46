#!/usr/bin/env bash
# Builds the one-folder clusterdeck bundle with PyInstaller, outside the repo.
#
#   bash packaging/build.sh [--python PYTHON] [--build-dir DIR] [--venv VENV]
#
# DIR (default: $CLUSTERDECK_BUILD_DIR, else ${TMPDIR:-/tmp}/clusterdeck-build) gets:
#   venv/               the build virtualenv (or VENV): clusterdeck's dependencies +
#                       PyInstaller, kept between builds (pip only checks it next time)
#   work/               PyInstaller's build folder
#   dist/clusterdeck/   the bundle: ./clusterdeck (CLI and GUI), _internal/, examples/
#
# PYTHON (default: python3) must be 3.11 or newer. CLUSTERDECK_BUNDLE_EXTRAS="numpy ..."
# bundles more packages for job files (installed into the build venv with pip first).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
python="${PYTHON:-python3}"
build_dir="${CLUSTERDECK_BUILD_DIR:-${TMPDIR:-/tmp}/clusterdeck-build}"
while [ $# -gt 0 ]; do
    case "$1" in
        --python) python="$2"; shift 2 ;;
        --build-dir) build_dir="$2"; shift 2 ;;
        --venv) venv="$2"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
case "$build_dir" in
    "$repo"|"$repo"/*) echo "build.sh: the build dir must be outside the repo" >&2; exit 2 ;;
esac

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "build.sh: $python is not Python 3.11 or newer (use --python)" >&2
    exit 2
fi

start=$(date +%s)
mkdir -p "$build_dir"
venv="${venv:-$build_dir/venv}"
if [ ! -x "$venv/bin/python" ]; then
    echo "build.sh: creating the build venv $venv" >&2
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
fi
echo "build.sh: installing clusterdeck's dependencies and PyInstaller" >&2
# A copy of the sources, so pip's build leaves nothing in the repo.
src="$build_dir/src"
rm -rf "$src" && mkdir -p "$src"
tar -C "$repo" --exclude=.git --exclude=.venv --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude=build --exclude=dist -cf - pyproject.toml README.md core broker gui \
    | tar -C "$src" -xf -
# shellcheck disable=SC2086
"$venv/bin/python" -m pip install -q "$src" "pyinstaller>=6.10" ${CLUSTERDECK_BUNDLE_EXTRAS:-}

dist="$build_dir/dist"
echo "build.sh: running PyInstaller (a few minutes)" >&2
"$venv/bin/python" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath "$dist" --workpath "$build_dir/work" "$here/clusterdeck.spec"

bundle="$dist/clusterdeck"
# Spark's launch scripts must stay executable (spark-submit -> spark-class -> java).
chmod +x "$bundle"/_internal/pyspark/bin/* "$bundle"/_internal/pyspark/sbin/* 2>/dev/null || true
# What a user of the bundle needs beside the executable.
rm -rf "$bundle/examples" "$bundle/share"
cp -r "$repo/examples" "$bundle/examples"
find "$bundle/examples" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$bundle/share"
cp "$here/io.github.clusterdeck.desktop" "$here/io.github.clusterdeck.metainfo.xml" \
   "$here/install-desktop.sh" "$here/uninstall-desktop.sh" "$bundle/share/"
cp -r "$here/icons" "$bundle/share/icons"

"$bundle/clusterdeck" --version >/dev/null
echo "build.sh: built $bundle ($(du -sh "$bundle" | cut -f1)) in $(( $(date +%s) - start )) s" >&2
echo "$bundle"
