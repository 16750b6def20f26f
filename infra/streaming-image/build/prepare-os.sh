#!/usr/bin/env bash
# Image build, first step: Ubuntu 24.04 brought up to date; no SSH server; no background upgrades (an image is
# replaced by a new one, never patched in place on a player's instance); the packages the boot units and the
# display need; the image's users and groups.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt_get() { apt-get -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confold -y -q "$@"; }

# shellcheck source=/dev/null
. /etc/os-release
if [[ "${ID:-}" != ubuntu || "${VERSION_ID:-}" != 24.04 ]]; then
  echo "prepare-os: expected Ubuntu 24.04, got ${PRETTY_NAME:-unknown}" >&2
  exit 1
fi

apt_get update
apt_get dist-upgrade
apt_get install --no-install-recommends \
  build-essential ca-certificates curl dkms e2fsprogs gnupg jq libglvnd-dev libvulkan1 linux-aws \
  linux-headers-aws mesa-utils nftables nvme-cli openssl pciutils pkg-config unzip util-linux x11-xserver-utils xauth \
  xserver-xorg-core

# No SSH: nothing listens on 22 and cloud-init installs no keys.
apt_get purge openssh-server
rm -rf /etc/ssh/sshd_config.d
cat >/etc/cloud/cloud.cfg.d/90-cgs-no-ssh.cfg <<'CFG'
ssh_pwauth: false
disable_root: true
ssh_deletekeys: true
ssh_genkeytypes: []
CFG

apt_get purge unattended-upgrades
systemctl disable apt-daily.timer apt-daily-upgrade.timer
systemctl mask apt-daily.service apt-daily-upgrade.service

getent group cgs-display >/dev/null || groupadd --system cgs-display
if ! getent passwd sunshine >/dev/null; then
  useradd --system --create-home --home-dir /var/lib/sunshine --shell /usr/sbin/nologin \
    --groups video,render,input,cgs-display sunshine
fi
# The host agent's unit may run as this user (host-agent/packaging/cgs-host-agent.service).
getent passwd cgs-agent >/dev/null || useradd --system --no-create-home --shell /usr/sbin/nologin cgs-agent
echo uinput >/etc/modules-load.d/cgs-uinput.conf
