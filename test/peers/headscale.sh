#!/usr/bin/env bash
# Headscale, the private network's control plane, and the tailscaled/tailscale pair its release supports: built
# through the Go module proxy into the cache, and run on loopback for `npm start` and the tests.
#
#   test/peers/headscale.sh [install]                    build if missing (cold: minutes), print the binaries' dir
#   test/peers/headscale.sh start <dir> <port> <policy>  run Headscale with its state in <dir> (sqlite) on
#                                                        127.0.0.1:<port>, the policy file <policy>; print the
#                                                        `export` lines (HEADSCALE_URL, HEADSCALE_API_KEY, ...)
#   test/peers/headscale.sh stop <dir>                   stop the Headscale started in <dir>
#
# `go install github.com/juanfont/headscale/cmd/headscale@<v>` is refused here (the module's version list answers
# 403), so a throwaway wrapper module requires the pinned release and builds its commands; tailscaled and tailscale
# come from the tailscale.com version that release requires, so the nodes speak the control plane's protocol.
set -euo pipefail

HEADSCALE_VERSION="${HEADSCALE_VERSION:-v0.28.0}"
# The version github.com/juanfont/headscale@$HEADSCALE_VERSION requires (its go.mod); v0.28.0 needs Go >= 1.25.5.
TAILSCALE_VERSION="${TAILSCALE_VERSION:-v1.94.1}"
CACHE_DIR="${CGS_CACHE_DIR:-$HOME/.cache/cgs}"
BIN_DIR="$CACHE_DIR/headscale/$HEADSCALE_VERSION"
START_TIMEOUT="${HEADSCALE_START_TIMEOUT:-60}"

log() { echo "[peers] headscale: $*" >&2; }

built() {
  [[ -x "$BIN_DIR/headscale" && -x "$BIN_DIR/tailscaled" && -x "$BIN_DIR/tailscale" && -f "$BIN_DIR/.built" ]]
}

install() {
  if built; then return; fi
  command -v go >/dev/null 2>&1 || {
    log "go (>= 1.25.5) is required to build Headscale"
    exit 1
  }
  mkdir -p "$BIN_DIR"
  # One build per cache dir: parallel test workers and `npm start` may call this at once.
  exec 9>"$BIN_DIR/.build.lock"
  flock 9
  if built; then return; fi
  local started work resolved dir module
  started=$(date +%s)
  work="$(mktemp -d -t cgs-headscale-build.XXXXXX)"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  log "building headscale $HEADSCALE_VERSION and tailscale.com $TAILSCALE_VERSION (Go module proxy; cold: minutes) ..."
  (
    cd "$work"
    printf 'module cgs.local/headscale-build\n\ngo 1.25.5\n' >go.mod
    export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false -mod=mod"
    # The checksum database has no entry for some of Headscale's pseudo-versions (github.com/tailscale/tailsql
    # answers 404): the two releases' own go.sum files, verified with the releases themselves, vouch for the rest.
    for module in "github.com/juanfont/headscale@$HEADSCALE_VERSION" "tailscale.com@$TAILSCALE_VERSION"; do
      dir="$(go mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
      [[ -f "$dir/go.sum" ]] || {
        log "no go.sum in the download of $module"
        exit 1
      }
      cat "$dir/go.sum" >>go.sum
    done
    sort -u -o go.sum go.sum
    go get "github.com/juanfont/headscale@$HEADSCALE_VERSION" "tailscale.com@$TAILSCALE_VERSION" >&2
    # The release's own dependency graph decides tailscale.com: nodes of another version would hide a mismatch.
    resolved="$(go list -m -f '{{.Version}}' tailscale.com)"
    if [[ "$resolved" != "$TAILSCALE_VERSION" ]]; then
      log "headscale $HEADSCALE_VERSION resolves tailscale.com $resolved, not $TAILSCALE_VERSION; set TAILSCALE_VERSION"
      exit 1
    fi
    go build -trimpath \
      -ldflags "-s -w -X github.com/juanfont/headscale/hscontrol/types.Version=$HEADSCALE_VERSION" \
      -o "$BIN_DIR/headscale" github.com/juanfont/headscale/cmd/headscale >&2
    go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/tailscaled" tailscale.com/cmd/tailscaled >&2
    go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/tailscale" tailscale.com/cmd/tailscale >&2
  )
  touch "$BIN_DIR/.built"
  log "built in $(($(date +%s) - started)) s into $BIN_DIR"
}

health_ok() { curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$1/health" 2>/dev/null; }

start() {
  local dir="$1" port="$2" policy="$3"
  [[ -f "$policy" ]] || {
    log "policy file $policy is missing"
    exit 1
  }
  install
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  local url="http://127.0.0.1:$port"
  if health_ok "$port"; then
    log "port $port already answers; not starting another Headscale"
    exit 1
  fi
  # The embedded DERP relay and its STUN listener (UDP, on the same port number) make every node reachable over
  # loopback without the internet; no MagicDNS, no metrics listener, no remote gRPC (the REST API is enough).
  cat >"$dir/config.yaml" <<YAML
server_url: $url
listen_addr: 127.0.0.1:$port
metrics_listen_addr: ""
grpc_listen_addr: 127.0.0.1:0
grpc_allow_insecure: false
disable_check_updates: true
unix_socket: $dir/headscale.sock
unix_socket_permission: "0700"
noise:
  private_key_path: $dir/noise_private.key
prefixes:
  v4: 100.64.0.0/10
  v6: fd7a:115c:a1e0::/48
  allocation: sequential
derp:
  server:
    enabled: true
    region_id: 999
    region_code: cgs
    region_name: cgs local
    verify_clients: true
    stun_listen_addr: 127.0.0.1:$port
    private_key_path: $dir/derp_server_private.key
    automatically_add_embedded_derp_region: true
    ipv4: 127.0.0.1
  urls: []
  paths: []
  auto_update_enabled: false
ephemeral_node_inactivity_timeout: ${HEADSCALE_EPHEMERAL_TIMEOUT:-120s}
database:
  type: sqlite
  sqlite:
    path: $dir/db.sqlite
    write_ahead_log: true
log:
  level: ${HEADSCALE_LOG_LEVEL:-warn}
policy:
  mode: file
  path: $policy
dns:
  magic_dns: false
  override_local_dns: false
  nameservers:
    global: []
logtail:
  enabled: false
taildrop:
  enabled: false
YAML
  : >"$dir/headscale.log"
  setsid nohup "$BIN_DIR/headscale" serve -c "$dir/config.yaml" >>"$dir/headscale.log" 2>&1 </dev/null 8>&- 9>&- &
  local pid=$!
  echo "$pid" >"$dir/headscale.pid"
  local deadline=$((SECONDS + START_TIMEOUT))
  until health_ok "$port"; do
    if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
      log "ERROR: Headscale did not answer on $url; last lines of $dir/headscale.log:"
      tail -n 30 "$dir/headscale.log" >&2 || true
      kill "$pid" 2>/dev/null || true
      exit 1
    fi
    sleep 0.2
  done
  # The sessions service's API key, created once per state dir through the local socket.
  if [[ ! -s "$dir/api-key" ]]; then
    "$BIN_DIR/headscale" -c "$dir/config.yaml" apikeys create --expiration 8760h 2>>"$dir/headscale.log" |
      tail -n 1 | tr -d '[:space:]' >"$dir/api-key"
    chmod 600 "$dir/api-key"
  fi
  [[ -s "$dir/api-key" ]] || {
    log "ERROR: could not create an API key; see $dir/headscale.log"
    exit 1
  }
  log "ready on $url (state in $dir)"
  echo "export HEADSCALE_URL=$url"
  echo "export HEADSCALE_API_KEY=$(cat "$dir/api-key")"
  echo "export HEADSCALE_BIN_DIR=$BIN_DIR"
}

stop() {
  local dir="$1" pid
  [[ -f "$dir/headscale.pid" ]] || return 0
  pid="$(cat "$dir/headscale.pid")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.1
    done
  fi
  rm -f "$dir/headscale.pid"
}

case "${1:-install}" in
install)
  install
  echo "$BIN_DIR"
  ;;
start)
  (($# == 4)) || {
    echo "usage: $0 start <dir> <port> <policy file>" >&2
    exit 2
  }
  start "$2" "$3" "$4"
  ;;
stop)
  (($# == 2)) || {
    echo "usage: $0 stop <dir>" >&2
    exit 2
  }
  stop "$2"
  ;;
*)
  echo "usage: $0 [install] | start <dir> <port> <policy file> | stop <dir>" >&2
  exit 2
  ;;
esac
