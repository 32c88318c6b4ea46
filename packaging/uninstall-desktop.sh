#!/usr/bin/env bash
# Removes what install-desktop.sh installed (with --system: the system-wide install).
#
#   uninstall-desktop.sh [--system]
#
# Clusters, logs and configuration (the appdirs folders: ~/.config/clusterdeck,
# ~/.local/share/clusterdeck, ~/.cache/clusterdeck/log) are left alone; the script says
# where they are.
set -euo pipefail

app_id=io.github.clusterdeck
system=0
case "${1:-}" in
    --system) system=1 ;;
    "") ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "uninstall-desktop.sh: unknown argument $1" >&2; exit 2 ;;
esac

if [ "$system" = 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "uninstall-desktop.sh: --system needs root" >&2; exit 2; }
    share=/usr/local/share
    app_dir=/opt/clusterdeck
    bin_dir=/usr/local/bin
else
    share="${XDG_DATA_HOME:-$HOME/.local/share}"
    app_dir="$HOME/.local/lib/clusterdeck"
    bin_dir="$HOME/.local/bin"
fi

rm -f "$share/applications/$app_id.desktop" "$share/metainfo/$app_id.metainfo.xml" \
      "$share/icons/hicolor/scalable/apps/$app_id.svg"
for size in 48 128 256; do
    rm -f "$share/icons/hicolor/${size}x${size}/apps/$app_id.png"
done
# The command link and the bundle copy only if they are install-desktop.sh's.
if [ -L "$bin_dir/clusterdeck" ] && [ "$(readlink "$bin_dir/clusterdeck")" = "$app_dir/clusterdeck" ]; then
    rm -f "$bin_dir/clusterdeck"
fi
if [ -x "$app_dir/clusterdeck" ] && [ -d "$app_dir/_internal" ]; then
    rm -rf "$app_dir"
fi

if command -v update-desktop-database >/dev/null; then
    update-desktop-database -q "$share/applications" || true
fi
if [ -f "$share/icons/hicolor/icon-theme.cache" ] && command -v gtk-update-icon-cache >/dev/null; then
    gtk-update-icon-cache -q -t "$share/icons/hicolor" || true
fi

echo "uninstall-desktop.sh: removed the desktop entry, the icons, the metainfo and $app_dir" >&2
if [ "$system" = 0 ]; then
    echo "uninstall-desktop.sh: your clusters, logs and settings stay in" \
        "${XDG_CONFIG_HOME:-$HOME/.config}/clusterdeck," \
        "${XDG_DATA_HOME:-$HOME/.local/share}/clusterdeck and" \
        "${XDG_CACHE_HOME:-$HOME/.cache}/clusterdeck; delete them by hand if you want." >&2
fi
