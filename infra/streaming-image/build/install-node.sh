#!/usr/bin/env bash
# Image build: Node.js 24 (the host agent's runtime) at the pinned version from NodeSource's apt repository, whose
# signing key must have the pinned fingerprint.
#   NODE_VERSION=24.x.y NODE_APT_VERSION=24.x.y-1nodesource1 NODESOURCE_KEY_FINGERPRINT=... install-node.sh
set -euo pipefail
: "${NODE_VERSION:?}" "${NODE_APT_VERSION:?}" "${NODESOURCE_KEY_FINGERPRINT:?}"
export DEBIAN_FRONTEND=noninteractive
keyring=/usr/share/keyrings/nodesource.gpg
curl -fsSL --retry 3 https://deb.nodesource.com/gpgkey/nodesource-repo.gpg.key | gpg --batch --yes --dearmor -o "$keyring"
fingerprint="$(gpg --show-keys --with-colons "$keyring" | awk -F: '$1 == "fpr" { print $10; exit }')"
if [[ "$fingerprint" != "$NODESOURCE_KEY_FINGERPRINT" ]]; then
  echo "install-node: signing key $fingerprint is not the pinned $NODESOURCE_KEY_FINGERPRINT" >&2
  exit 1
fi
echo "deb [signed-by=$keyring] https://deb.nodesource.com/node_24.x nodistro main" \
  >/etc/apt/sources.list.d/nodesource.list
apt-get -o DPkg::Lock::Timeout=600 -q update
apt-get -o DPkg::Lock::Timeout=600 -y -q install "nodejs=$NODE_APT_VERSION"
apt-mark hold nodejs
if [[ "$(node --version)" != "v$NODE_VERSION" ]]; then
  echo "install-node: node $(node --version), expected v$NODE_VERSION" >&2
  exit 1
fi
