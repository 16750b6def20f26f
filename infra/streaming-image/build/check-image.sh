#!/usr/bin/env bash
# Installed as /opt/cgs/bin/cgs-check-image; Image Builder's test stage runs it on an instance launched from the new
# image (without a session's user data), and an operator can run it on a live host.
#   GPU_NAME=... SUNSHINE_VERSION=... TAILSCALE_VERSION=... NODE_VERSION=... cgs-check-image
set -euo pipefail
: "${GPU_NAME:?}" "${SUNSHINE_VERSION:?}" "${TAILSCALE_VERSION:?}" "${NODE_VERSION:?}"
failures=0
check() {
  local what="$1"
  shift
  if "$@" >/dev/null 2>&1; then
    echo "ok   $what"
  else
    echo "FAIL $what" >&2
    failures=$((failures + 1))
  fi
}
gpu_is() { nvidia-smi --query-gpu=name --format=csv,noheader | grep -qF "$GPU_NAME"; }
version_starts() { [[ "$(dpkg-query -W -f='${Version}' "$1")" == "$2"* ]]; }
no_ssh_server() { ! dpkg-query -W -f='${Status}' openssh-server 2>/dev/null | grep -q "install ok installed"; }
nothing_on_22() { ! ss -Hltn 'sport = :22' | grep -q .; }
display_up() {
  systemctl is-active --quiet cgs-display.service &&
    DISPLAY=:0 XAUTHORITY=/run/cgs/display/Xauthority xrandr --query | grep -q ' connected'
}
not_active() { ! systemctl is-active --quiet "$1"; }
nothing_on_47991() { ! ss -Hltn 'sport = :47991' | grep -q .; }
no_assignment() { [[ ! -e /run/cgs/assign/assignment.json && ! -e /run/cgs/session-up ]]; }

check "the $GPU_NAME answers through the NVIDIA driver" gpu_is
check "Sunshine $SUNSHINE_VERSION" version_starts sunshine "$SUNSHINE_VERSION"
check "Tailscale $TAILSCALE_VERSION" version_starts tailscale "$TAILSCALE_VERSION"
check "Node.js $NODE_VERSION" test "$(node --version)" = "v$NODE_VERSION"
check "the host agent bundle parses" node --check /opt/cgs/host-agent/cgs-host-agent.cjs
for unit in tailscaled.service cgs-display.service cgs-boot.service cgs-sunshine.service cgs-host-agent.service \
  cgs-assign.path; do
  check "$unit is enabled" systemctl is-enabled --quiet "$unit"
done
check "cgs-assign.path waits for a pool instance's assignment" systemctl is-active --quiet cgs-assign.path
check "cgs-assign.service is installed (started by its path only)" systemctl cat cgs-assign.service
check "jq (cgs-assign checks the assignment with it)" jq --version
check "no SSH server installed" no_ssh_server
check "nothing listens on port 22" nothing_on_22
check "the headless display is up on the GPU" display_up
# Without a session's user data the boot unit fails closed, so Sunshine never listens; without a pool slot's, the
# agent serves no assignment endpoint, and nothing was ever assigned.
check "Sunshine is not running without a session" not_active cgs-sunshine.service
check "nothing listens on the assignment port 47991" nothing_on_47991
check "no assignment installed" no_assignment
((failures == 0)) || {
  echo "$failures check(s) failed" >&2
  exit 1
}
