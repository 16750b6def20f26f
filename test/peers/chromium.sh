#!/usr/bin/env bash
# Installs Debian's chromium for the portal's headless browser test (playwright-core drives it; Playwright's own
# browser download cannot run here). Idempotent: does nothing when /usr/bin/chromium already runs.
#   test/peers/chromium.sh          install if missing, print the version
set -euo pipefail

CHROMIUM_BIN="${CHROMIUM_BIN:-/usr/bin/chromium}"
log() { echo "[peers] chromium: $*" >&2; }

if [[ -x "$CHROMIUM_BIN" ]] && "$CHROMIUM_BIN" --headless --no-sandbox --version >/dev/null 2>&1; then
  log "already installed: $("$CHROMIUM_BIN" --headless --no-sandbox --version 2>/dev/null)"
  exit 0
fi

as_root() { if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi; }

started=$(date +%s)
log "installing Debian's chromium (apt) ..."
# Parallel runs of this script share dpkg's lock; apt waits for it rather than failing.
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
  --no-install-recommends chromium fonts-liberation >&2
"$CHROMIUM_BIN" --headless --no-sandbox --version >&2
log "installed in $(($(date +%s) - started)) s"
