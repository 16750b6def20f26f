#!/usr/bin/env bash
# Installs helm v3 (for `helm lint` / `helm template`; no cluster needed) through the Go module proxy.
# Idempotent: prints progress to stderr and the binary's path on stdout.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CACHE_DIR="${CGS_CACHE_DIR:-$HOME/.cache/cgs}"
BIN_DIR="$CACHE_DIR/bin"
HELM_BIN="$BIN_DIR/helm"

log() { echo "[helm.sh] $*" >&2; }

installed_version() {
  "$HELM_BIN" version --template '{{.Version}}' 2>/dev/null || true
}

if [[ -x "$HELM_BIN" && "$(installed_version)" == "$HELM_VERSION" ]]; then
  log "helm $HELM_VERSION already at $HELM_BIN"
  echo "$HELM_BIN"
  exit 0
fi

command -v go >/dev/null 2>&1 || { log "go is required to build helm"; exit 1; }
mkdir -p "$BIN_DIR"
# Only one concurrent build per cache dir: parallel test workers may call this at once.
exec 9>"$BIN_DIR/.helm.lock"
flock 9
if [[ -x "$HELM_BIN" && "$(installed_version)" == "$HELM_VERSION" ]]; then
  echo "$HELM_BIN"
  exit 0
fi

log "building helm $HELM_VERSION with go install (first run takes a few minutes) ..."
start=$(date +%s)
# helm reports its version from ldflags; without them `helm version` would print "v3.x-dev" style values.
GOBIN="$BIN_DIR" CGO_ENABLED=0 go install \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
log "helm $HELM_VERSION installed in $(( $(date +%s) - start ))s at $HELM_BIN"
echo "$HELM_BIN"
