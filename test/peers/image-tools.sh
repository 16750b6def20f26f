#!/usr/bin/env bash
# Debian tools the streaming-image tests use: shellcheck (every shell step of the image), systemd-analyze (its
# units), Xvfb and xauth (the boot test's display), losetup, mkfs.ext4, ip, nft and openssl (the boot test's volume,
# namespace and TLS identity). Idempotent: installs only what is missing.
#   test/peers/image-tools.sh
set -euo pipefail
log() { echo "[peers] image-tools: $*" >&2; }
as_root() { if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi; }

declare -A package_of=(
  [shellcheck]=shellcheck [systemd-analyze]=systemd [Xvfb]=xvfb [xauth]=xauth [mcookie]=util-linux
  [losetup]=mount [setpriv]=util-linux [mkfs.ext4]=e2fsprogs [ip]=iproute2 [openssl]=openssl [nft]=nftables
)
missing=()
for tool in "${!package_of[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${package_of[$tool]}")
done
if ((${#missing[@]} == 0)); then
  log "all present (shellcheck $(shellcheck --version | awk '/^version:/ { print $2 }'))"
  exit 0
fi
mapfile -t packages < <(printf '%s\n' "${missing[@]}" | sort -u)
log "installing ${packages[*]} (apt) ..."
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
  --no-install-recommends "${packages[@]}" >&2
