#!/usr/bin/env bash
# Re-vendors the web UI's front-end libraries from npm into static/vendor/ (no CDN, no build step).
# Pinned versions: bump one here, run this script, look at the pages, commit static/vendor/.
set -euo pipefail

HTMX=2.0.11        # htmx.org: the live parts of pages (polling, partial swaps)
UPLOT=1.6.32       # uplot: training curves
PICO=2.1.1         # @picocss/pico: the base stylesheet, tuned in static/css/argus.css

repo="$(cd "$(dirname "$0")/.." && pwd)"
vendor="$repo/static/vendor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

npm install --prefix "$tmp" --no-audit --no-fund --no-save --ignore-scripts \
  "htmx.org@$HTMX" "uplot@$UPLOT" "@picocss/pico@$PICO"
mods="$tmp/node_modules"

# Each library in its own folder, its licence beside it, and nothing left over from a
# previous version.
copy() {  # copy <dest folder> <source files...>
  local dest="$vendor/$1"
  shift
  rm -rf "$dest"
  mkdir -p "$dest"
  cp "$@" "$dest/"
}
copy htmx "$mods/htmx.org/dist/htmx.min.js" "$mods/htmx.org/LICENSE"
copy uplot "$mods/uplot/dist/uPlot.iife.min.js" "$mods/uplot/dist/uPlot.min.css" "$mods/uplot/LICENSE"
copy pico "$mods/@picocss/pico/css/pico.min.css" "$mods/@picocss/pico/LICENSE.md"

cat > "$vendor/VERSIONS" <<VERSIONS
htmx.org $HTMX
uplot $UPLOT
@picocss/pico $PICO
VERSIONS
echo "Vendored into $vendor:"
cat "$vendor/VERSIONS"
