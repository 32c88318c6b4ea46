#!/usr/bin/env bash
# Installs clusterdeck's desktop entry, icons and AppStream metainfo, and optionally a
# built bundle, for this user (under ~/.local) or for everyone (--system, as root).
#
#   install-desktop.sh [--system] [--bundle DIR | --exec PATH]
#
#   --bundle DIR   copy the bundle DIR (packaging/build.sh's dist/clusterdeck) to
#                  ~/.local/lib/clusterdeck (--system: /opt/clusterdeck) and link
#                  ~/.local/bin/clusterdeck (--system: /usr/local/bin/clusterdeck) to it.
#                  The default when this script runs from a bundle's share/ folder.
#   --exec PATH    the clusterdeck command to launch, e.g. one pip or pipx installed.
#                  The default otherwise: `command -v clusterdeck`.
#
# The desktop entry's Exec line gets the command's absolute path, so the menu does not
# depend on the desktop session's PATH. uninstall-desktop.sh undoes all of it.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
app_id=io.github.clusterdeck
system=0
bundle=""
exec_path=""
while [ $# -gt 0 ]; do
    case "$1" in
        --system) system=1; shift ;;
        --bundle) bundle="$2"; shift 2 ;;
        --exec) exec_path="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "install-desktop.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

if [ "$system" = 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "install-desktop.sh: --system needs root" >&2; exit 2; }
    share=/usr/local/share
    app_dir=/opt/clusterdeck
    bin_dir=/usr/local/bin
else
    share="${XDG_DATA_HOME:-$HOME/.local/share}"
    app_dir="$HOME/.local/lib/clusterdeck"
    bin_dir="$HOME/.local/bin"
fi

# Run from inside a bundle (dist/clusterdeck/share/): install that bundle.
if [ -z "$bundle" ] && [ -z "$exec_path" ] && [ -x "$here/../clusterdeck" ] \
        && [ -d "$here/../_internal" ]; then
    bundle="$(cd "$here/.." && pwd)"
fi

if [ -n "$bundle" ]; then
    bundle="$(cd "$bundle" && pwd)"
    if [ ! -x "$bundle/clusterdeck" ] || [ ! -d "$bundle/_internal" ]; then
        echo "install-desktop.sh: $bundle is not a clusterdeck bundle" >&2
        exit 2
    fi
    if [ "$bundle" != "$app_dir" ]; then
        echo "install-desktop.sh: copying the bundle to $app_dir" >&2
        rm -rf "$app_dir.new"
        mkdir -p "$(dirname "$app_dir")"
        cp -a "$bundle" "$app_dir.new"
        rm -rf "$app_dir"
        mv "$app_dir.new" "$app_dir"
    fi
    mkdir -p "$bin_dir"
    ln -sfn "$app_dir/clusterdeck" "$bin_dir/clusterdeck"
    exec_path="$app_dir/clusterdeck"
elif [ -z "$exec_path" ]; then
    exec_path="$(command -v clusterdeck || true)"
    [ -n "$exec_path" ] || { echo "install-desktop.sh: no clusterdeck command on PATH; " \
        "give --bundle DIR or --exec PATH" >&2; exit 2; }
fi
exec_path="$(cd "$(dirname "$exec_path")" && pwd)/$(basename "$exec_path")"
[ -x "$exec_path" ] || { echo "install-desktop.sh: $exec_path is not executable" >&2; exit 2; }

# The Exec key's quoting rules: a path with a space or a reserved character is quoted;
# the four characters that would need escaping inside the quotes are refused.
case "$exec_path" in
    *[\"\`\$\\]*) echo "install-desktop.sh: cannot put $exec_path in an Exec line" >&2; exit 2 ;;
esac
quoted="$exec_path"
case "$exec_path" in
    *[[:space:]\'\<\>\~\|\&\;\*\?\#\(\)]*) quoted="\"$exec_path\"" ;;
esac

mkdir -p "$share/applications" "$share/metainfo" "$share/icons/hicolor/scalable/apps"
while IFS= read -r line; do
    case "$line" in
        "Exec=clusterdeck "*) line="Exec=$quoted ${line#Exec=clusterdeck }" ;;
        TryExec=*) line="TryExec=$exec_path" ;;
    esac
    printf '%s\n' "$line"
done < "$here/$app_id.desktop" > "$share/applications/$app_id.desktop"
chmod 644 "$share/applications/$app_id.desktop"
install -m 644 "$here/$app_id.metainfo.xml" "$share/metainfo/$app_id.metainfo.xml"
install -m 644 "$here/icons/$app_id.svg" "$share/icons/hicolor/scalable/apps/$app_id.svg"
for size in 48 128 256; do
    mkdir -p "$share/icons/hicolor/${size}x${size}/apps"
    install -m 644 "$here/icons/$app_id-$size.png" \
        "$share/icons/hicolor/${size}x${size}/apps/$app_id.png"
done

if command -v update-desktop-database >/dev/null; then
    update-desktop-database -q "$share/applications" || true
fi
if [ "$system" = 1 ] && command -v gtk-update-icon-cache >/dev/null; then
    gtk-update-icon-cache -q -t "$share/icons/hicolor" || true
fi

echo "install-desktop.sh: installed $share/applications/$app_id.desktop (Exec: $exec_path gui)" >&2
case ":$PATH:" in
    *":$bin_dir:"*) ;;
    *) [ -n "$bundle" ] && echo "install-desktop.sh: note: $bin_dir is not on PATH; the menu" \
        "entry works anyway, for a terminal add it to PATH" >&2 ;;
esac
exit 0
