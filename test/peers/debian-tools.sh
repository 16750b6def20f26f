#!/usr/bin/env bash
# Debian tools the tests run as real peers, installed when their command is missing (idempotent, quiet):
#   Xvfb, xdotool, xauth: a real X server, real input and its cookies (the host agent's idle reader, the image's
#     boot test);
#   ShellCheck and systemd-analyze: every shell step and unit of the streaming image;
#   losetup, mkfs.ext4, ip, nft, setpriv, mcookie: the boot test's volume, namespace, firewall and users;
#   openssl: self-signed certificates like the ones Sunshine makes;
#   jq: the image's cgs-assign checks a pool instance's assignment with it;
#   dnsmasq: the gateway's fault tests publish a headless Service's records with one of their own.
# One command => package entry per tool; add new ones here rather than in another script.
#   test/peers/debian-tools.sh
set -euo pipefail
log() { echo "[peers] debian-tools: $*" >&2; }
as_root() { if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi; }

declare -A package_of=(
  [Xvfb]=xvfb [xdotool]=xdotool [xauth]=xauth [shellcheck]=shellcheck [systemd-analyze]=systemd
  [mcookie]=util-linux [losetup]=mount [setpriv]=util-linux [mkfs.ext4]=e2fsprogs [ip]=iproute2
  [openssl]=openssl [nft]=nftables [dnsmasq]=dnsmasq-base [jq]=jq
)
missing=()
for tool in "${!package_of[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${package_of[$tool]}")
done
if ((${#missing[@]} == 0)); then
  log "all present"
  exit 0
fi
mapfile -t packages < <(printf '%s\n' "${missing[@]}" | sort -u)
started=$(date +%s)
log "installing ${packages[*]} (apt) ..."
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
  --no-install-recommends "${packages[@]}" >&2
log "installed in $(($(date +%s) - started)) s"
