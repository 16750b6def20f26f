#!/usr/bin/env bash
# Image build, last step: the host agent (bundle and unit from this repository's host-agent workspace), the boot
# and assignment scripts and units of infra/streaming-image/rootfs, enabled; a manifest of what the image holds;
# the build's own files removed.
#   FILES=/opt/cgs/image-build install-host.sh
set -euo pipefail
: "${FILES:?}"
install -D -m 0644 "$FILES/host-agent/cgs-host-agent.cjs" /opt/cgs/host-agent/cgs-host-agent.cjs
install -D -m 0644 "$FILES/host-agent/cgs-host-agent.service" /etc/systemd/system/cgs-host-agent.service
node --check /opt/cgs/host-agent/cgs-host-agent.cjs

cp -r --no-preserve=ownership "$FILES/rootfs/." /
chmod 0755 /opt/cgs/bin/*
install -m 0755 "$FILES/build/check-image.sh" /opt/cgs/bin/cgs-check-image
install -d -m 0700 /etc/cgs
systemctl daemon-reload
systemd-analyze verify /etc/systemd/system/cgs-*.service /etc/systemd/system/cgs-*.path
# cgs-assign.service is not enabled: cgs-assign.path starts it when a pool instance's agent spools an assignment.
systemctl enable cgs-display.service cgs-boot.service cgs-sunshine.service cgs-host-agent.service cgs-assign.path

jq -n \
  --arg built "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --arg kernel "$(uname -r)" \
  --arg driver "$(cat /etc/nvidia/cgs-gaming-driver-version)" \
  --arg sunshine "$(dpkg-query -W -f='${Version}' sunshine)" \
  --arg tailscale "$(dpkg-query -W -f='${Version}' tailscale)" \
  --arg node "$(node --version)" \
  --arg agent "$(sha256sum /opt/cgs/host-agent/cgs-host-agent.cjs | cut -d' ' -f1)" \
  '{built: $built, kernel: $kernel, nvidiaGamingDriver: $driver, sunshine: $sunshine, tailscale: $tailscale,
    node: $node, hostAgentSha256: $agent}' >/opt/cgs/image-manifest.json

rm -rf "$FILES"
apt-get clean
rm -rf /var/lib/apt/lists/*
