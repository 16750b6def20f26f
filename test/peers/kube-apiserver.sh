#!/usr/bin/env bash
# Installs what the chart test needs to admit the chart on a real Kubernetes API server: etcd (Debian), a
# kube-apiserver built from the Go module proxy, and the CRDs of the chart's add-on kinds (SecretProviderClass from
# the Secrets Store CSI driver, ServiceMonitor and PrometheusRule from the Prometheus Operator), taken from those
# projects' module zips. Nothing is started here: the test starts etcd and the API server on free ports itself.
# Idempotent, cached under $CGS_CACHE_DIR; progress on stderr, `export` lines on stdout:
#   eval "$(bash test/peers/kube-apiserver.sh)"   # ETCD_BIN, KUBE_APISERVER_BIN, KUBE_CRDS_DIR, KUBE_GIT_VERSION
set -euo pipefail

# A release and its staging modules (k8s.io/api, k8s.io/apiserver, ...) at the matching v0.x version.
KUBE_GIT_VERSION="${KUBE_GIT_VERSION:-v1.37.0}"
# Module versions whose go.mod the checksum database knows (v1.5.4 and v1.5.0 of the CSI driver are not).
SECRETS_STORE_CSI_VERSION="${SECRETS_STORE_CSI_VERSION:-v1.5.3}"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
CACHE_DIR="${CGS_CACHE_DIR:-$HOME/.cache/cgs}"
DIR="$CACHE_DIR/kube-apiserver/$KUBE_GIT_VERSION"
BIN="$DIR/kube-apiserver"
CRDS="$CACHE_DIR/kube-crds/csi-$SECRETS_STORE_CSI_VERSION-po-$PROMETHEUS_OPERATOR_VERSION"

log() { echo "[kube-apiserver.sh] $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

install_etcd() {
  command -v etcd >/dev/null && return
  log "apt-get install -y etcd-server ..."
  [[ "$(id -u)" == 0 ]] || die "etcd is missing: install Debian's etcd-server (as root)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >&2 ||
    { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >&2; }
  # The package's own unit would hold 2379; the test runs its own etcd on a free port instead.
  if command -v systemctl >/dev/null && systemctl is-active --quiet etcd 2>/dev/null; then
    systemctl disable --now etcd >&2 || true
  fi
}

installed_version() { "$BIN" --version 2>/dev/null | awk '{print $2}' || true; }

build_apiserver() {
  [[ -x "$BIN" && "$(installed_version)" == "$KUBE_GIT_VERSION" ]] && return
  command -v go >/dev/null || die "go is required to build kube-apiserver"
  local start src staging minor
  start=$(date +%s)
  src="$DIR/src"
  rm -rf "$src"
  mkdir -p "$src"
  staging="v0.${KUBE_GIT_VERSION#v1.}"
  minor="$(echo "$KUBE_GIT_VERSION" | cut -d. -f2)"
  log "building kube-apiserver $KUBE_GIT_VERSION from the Go module proxy (cold: about 5 minutes, 1 GB of modules) ..."
  # k8s.io/kubernetes points its staging modules at ./staging; outside its repository each needs a replace line.
  local gomod
  gomod="$(cd "$src" && go mod download -json "k8s.io/kubernetes@$KUBE_GIT_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$KUBE_GIT_VERSION"
  {
    echo "module cgs.local/kube-apiserver"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
    echo
    echo "require k8s.io/kubernetes $KUBE_GIT_VERSION"
    echo
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"$staging"'#p' "$gomod"
  } >"$src/go.mod"
  cat >"$src/main.go" <<'GO'
// The upstream cmd/kube-apiserver main, built outside the kubernetes repository.
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
GO
  (cd "$src" && go mod tidy >&2)
  # Without the version the server reports v0.0.0 and helm refuses the chart's kubeVersion.
  local pkg=k8s.io/component-base/version
  (cd "$src" && CGO_ENABLED=0 go build -o "$BIN.part" -ldflags "-s -w -X $pkg.gitVersion=$KUBE_GIT_VERSION \
    -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" . >&2)
  mv "$BIN.part" "$BIN"
  log "kube-apiserver $KUBE_GIT_VERSION built in $(($(date +%s) - start)) s at $BIN"
}

# Copies one CRD file out of a module zip (downloaded by the go command, checked against the checksum database).
crd_from_module() {
  local module="$1" version="$2" file="$3" dir
  dir="$(cd "$DIR" && go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$dir/$file" ]] || die "$module@$version has no $file"
  cp "$dir/$file" "$CRDS.part/"
}

fetch_crds() {
  [[ -d "$CRDS" ]] && return
  log "taking the CRDs from the Secrets Store CSI driver $SECRETS_STORE_CSI_VERSION and the Prometheus Operator $PROMETHEUS_OPERATOR_VERSION ..."
  rm -rf "$CRDS.part"
  mkdir -p "$CRDS.part"
  crd_from_module sigs.k8s.io/secrets-store-csi-driver "$SECRETS_STORE_CSI_VERSION" \
    config/crd/bases/secrets-store.csi.x-k8s.io_secretproviderclasses.yaml
  local po=github.com/prometheus-operator/prometheus-operator
  crd_from_module "$po" "$PROMETHEUS_OPERATOR_VERSION" example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
  crd_from_module "$po" "$PROMETHEUS_OPERATOR_VERSION" example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
  mv "$CRDS.part" "$CRDS"
}

mkdir -p "$DIR"
# One build per cache dir at a time: two test runs may ask at once.
exec 9>"$DIR/.lock"
flock 9
install_etcd
build_apiserver
fetch_crds
echo "export ETCD_BIN=$(command -v etcd)"
echo "export KUBE_APISERVER_BIN=$BIN"
echo "export KUBE_CRDS_DIR=$CRDS"
echo "export KUBE_GIT_VERSION=$KUBE_GIT_VERSION"
