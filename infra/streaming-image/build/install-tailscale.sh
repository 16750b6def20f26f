#!/usr/bin/env bash
# Image build: tailscaled and tailscale at the pinned version from Tailscale's apt repository, whose signing key
# must have the pinned fingerprint. tailscaled runs at boot; cgs-boot joins with the instance's single-use key.
#   TAILSCALE_VERSION=... TAILSCALE_KEY_FINGERPRINT=... install-tailscale.sh
set -euo pipefail
: "${TAILSCALE_VERSION:?}" "${TAILSCALE_KEY_FINGERPRINT:?}"
export DEBIAN_FRONTEND=noninteractive
keyring=/usr/share/keyrings/tailscale-archive-keyring.gpg
curl -fsSL --retry 3 -o "$keyring" https://pkgs.tailscale.com/stable/ubuntu/noble.noarmor.gpg
fingerprint="$(gpg --show-keys --with-colons "$keyring" | awk -F: '$1 == "fpr" { print $10; exit }')"
if [[ "$fingerprint" != "$TAILSCALE_KEY_FINGERPRINT" ]]; then
  echo "install-tailscale: signing key $fingerprint is not the pinned $TAILSCALE_KEY_FINGERPRINT" >&2
  exit 1
fi
echo "deb [signed-by=$keyring] https://pkgs.tailscale.com/stable/ubuntu noble main" \
  >/etc/apt/sources.list.d/tailscale.list
apt-get -o DPkg::Lock::Timeout=600 -q update
apt-get -o DPkg::Lock::Timeout=600 -y -q install "tailscale=$TAILSCALE_VERSION"
apt-mark hold tailscale
systemctl enable tailscaled.service
