#!/usr/bin/env bash
# Debian packages the tests run as real peers, installed when their command is missing (idempotent, quiet):
#   Xvfb + xdotool: a real X server and real input for the host agent's idle-time reader;
#   openssl: self-signed certificates like the ones Sunshine makes.
# One `package:command` pair per tool; add new ones here rather than in another script.
set -euo pipefail

tools=(xvfb:Xvfb xdotool:xdotool openssl:openssl)
log() { echo "[peers] debian-tools: $*" >&2; }
as_root() { if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
for pair in "${tools[@]}"; do
  command -v "${pair#*:}" >/dev/null 2>&1 || missing+=("${pair%%:*}")
done
if ((${#missing[@]} == 0)); then
  log "present: ${tools[*]#*:}"
  exit 0
fi
started=$(date +%s)
log "installing ${missing[*]} (apt) ..."
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
  --no-install-recommends "${missing[@]}" >&2
log "installed in $(($(date +%s) - started)) s"
