#!/usr/bin/env bash
# Installs Debian's dnsmasq-base: a real DNS server the gateway's fault tests start on their own port to publish a
# headless Service's records (how many gateway replicas serve). Idempotent: does nothing when dnsmasq runs.
#   test/peers/dnsmasq.sh          install if missing, print the version
set -euo pipefail

log() { echo "[peers] dnsmasq: $*" >&2; }

if command -v dnsmasq >/dev/null && dnsmasq --version >/dev/null 2>&1; then
  log "already installed: $(dnsmasq --version | head -n 1)"
  exit 0
fi

as_root() { if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi; }

started=$(date +%s)
log "installing Debian's dnsmasq-base (apt; no service is started) ..."
# Parallel runs share dpkg's lock; apt waits for it rather than failing.
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
  --no-install-recommends dnsmasq-base >&2
log "installed in $(($(date +%s) - started)) s: $(dnsmasq --version | head -n 1)"
