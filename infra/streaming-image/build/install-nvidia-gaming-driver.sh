#!/usr/bin/env bash
# Image build: AWS's NVIDIA gaming driver from the archive S3Download put in DRIVER_DIR, its vGaming licence (EC2
# customers' marketplace licence and the certificate matching the driver version), nouveau kept off the GPU, and an
# Xorg configuration whose virtual screen the headless GPU drives.
#   DRIVER_DIR=/var/tmp/nvidia-gaming DISABLE_GSP=true|false install-nvidia-gaming-driver.sh
set -euo pipefail
: "${DRIVER_DIR:?}" "${DISABLE_GSP:?}"
CERT_BASE="https://nvidia-gaming.s3.amazonaws.com/GridSwCert-Archive"
die() {
  echo "install-nvidia-gaming-driver: $*" >&2
  exit 1
}

# The licence certificate AWS's driver instructions pair with each driver version.
cert_for() {
  if dpkg --compare-versions "$1" ge 590.48; then
    echo GridSwCert_2026_03_02.cert
  elif dpkg --compare-versions "$1" ge 575.64; then
    echo GridSwCertLinux_2025_07_01.cert
  elif dpkg --compare-versions "$1" ge 460.39; then
    echo GridSwCertLinux_2024_02_22.cert
  else
    die "driver $1 is older than the image supports"
  fi
}

mapfile -t archives < <(find "$DRIVER_DIR" -maxdepth 1 -name '*.zip')
((${#archives[@]} == 1)) || die "expected one driver archive in $DRIVER_DIR, found ${#archives[@]}"
rm -rf "$DRIVER_DIR/unpacked"
unzip -q "${archives[0]}" -d "$DRIVER_DIR/unpacked"
installer="$(find "$DRIVER_DIR/unpacked" -name 'NVIDIA-Linux-x86_64-*.run' | head -n 1)"
[[ -n "$installer" ]] || die "no NVIDIA-Linux-x86_64-*.run in ${archives[0]}"
version="$(basename "$installer" | sed -E 's/^NVIDIA-Linux-x86_64-([0-9.]+).*/\1/')"

cat >/etc/modprobe.d/cgs-blacklist-nouveau.conf <<'CONF'
blacklist nouveau
options nouveau modeset=0
CONF
update-initramfs -u
sh "$installer" --silent --dkms --no-questions --ui=none

install -d -m 0755 /etc/nvidia
echo "vGamingMarketplace=2" >/etc/nvidia/gridd.conf
curl -fsSL --retry 3 -o /etc/nvidia/GridSwCert.txt "$CERT_BASE/$(cert_for "$version")"
if [[ "$DISABLE_GSP" == true ]]; then
  echo "options nvidia NVreg_EnableGpuFirmware=0" >/etc/modprobe.d/cgs-nvidia-gsp.conf
fi

# Xorg's BusID is decimal bus:device:function; lspci prints hex.
slot="$(lspci -D -d 10de: | awk 'NR == 1 { print $1 }')"
[[ -n "$slot" ]] || die "no NVIDIA GPU on the PCI bus"
IFS=':.' read -r _domain bus device function <<<"$slot"
busid="$(printf 'PCI:%d:%d:%d' "0x$bus" "0x$device" "0x$function")"
cat >/etc/X11/xorg.conf <<CONF
# Headless NVIDIA display for Sunshine (cgs-display.service): the gaming driver's virtual screen at 1920x1080,
# no blanking or power saving (a blanked or modeset screen stops NvFBC capture).
Section "ServerLayout"
    Identifier "cgs"
    Screen 0 "Screen0"
EndSection

Section "ServerFlags"
    Option "BlankTime" "0"
    Option "StandbyTime" "0"
    Option "SuspendTime" "0"
    Option "OffTime" "0"
EndSection

Section "Device"
    Identifier "Device0"
    Driver "nvidia"
    BusID "$busid"
    Option "AllowEmptyInitialConfiguration" "True"
    Option "ModeValidation" "AllowNonEdidModes"
EndSection

Section "Screen"
    Identifier "Screen0"
    Device "Device0"
    DefaultDepth 24
    Option "metamodes" "1920x1080 +0+0"
    SubSection "Display"
        Depth 24
        Virtual 1920 1080
    EndSubSection
EndSection
CONF
echo "$version" >/etc/nvidia/cgs-gaming-driver-version
rm -rf "$DRIVER_DIR"
