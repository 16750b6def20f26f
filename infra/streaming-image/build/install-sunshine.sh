#!/usr/bin/env bash
# Image build: Sunshine at the pinned version, its package checked against the pinned SHA-256. It runs only as
# cgs-sunshine.service (with the configuration cgs-boot writes), never as the package's per-user service.
#   SUNSHINE_VERSION=... SUNSHINE_URL=... SUNSHINE_SHA256=... install-sunshine.sh
set -euo pipefail
: "${SUNSHINE_VERSION:?}" "${SUNSHINE_URL:?}" "${SUNSHINE_SHA256:?}"
export DEBIAN_FRONTEND=noninteractive
deb=/var/tmp/sunshine.deb
curl -fsSL --retry 3 -o "$deb" "$SUNSHINE_URL"
echo "$SUNSHINE_SHA256  $deb" | sha256sum --check --strict -
apt-get -o DPkg::Lock::Timeout=600 -y -q install --no-install-recommends "$deb"
rm -f "$deb"
apt-mark hold sunshine
installed="$(dpkg-query -W -f='${Version}' sunshine)"
if [[ "$installed" != "$SUNSHINE_VERSION"* ]]; then
  echo "install-sunshine: installed $installed, expected $SUNSHINE_VERSION" >&2
  exit 1
fi
systemctl --global disable sunshine.service 2>/dev/null || true
