#!/usr/bin/env bash
# `npm test`: start the real peers the suites need, build once (some tests spawn compiled processes), run every
# workspace's jest project, and end with a plain "N passed, N failed" line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash test/peers/up.sh postgres redis moto stripe-mock keycloak mailpit
bash test/peers/chromium.sh
bash test/peers/debian-tools.sh
bash test/peers/helm.sh >/dev/null
# etcd (Debian) and a kube-apiserver built from Go modules, for the chart test on a real API server (cold: ~5-16 min).
bash test/peers/kube-apiserver.sh >/dev/null
# Headscale and the tailscaled/tailscale of its release (the private-network suites and npm start's launcher run
# their own Headscale from these; the first build takes minutes).
bash test/peers/headscale.sh install >/dev/null
# promtool (alert unit tests) comes with Debian's prometheus; the platform's observability test starts
# Prometheus and Zipkin itself, on its own ports, from these installs.
bash test/peers/peer.sh prometheus install
bash test/peers/peer.sh zipkin install
eval "$(bash test/peers/up.sh --env)"
# Processes the suites spawn open their /metrics listener on a free port unless a test names one (npm start's
# launcher does), so two processes of one kind never collide on the fixed default (PORT + 1000).
export METRICS_PORT="${METRICS_PORT:-0}"

echo "[test] building workspaces (tsc -b) and the API reference" >&2
npx tsc -b
node gateway/scripts/build-api-reference.mjs >/dev/null

report="$(mktemp -t jest-report.XXXXXX.json)"
status=0
NODE_OPTIONS="--experimental-vm-modules ${NODE_OPTIONS:-}" npx jest -c jest.config.js --maxWorkers=2 --json --outputFile="$report" "$@" || status=$?
node -e '
  const r = require(process.argv[1]);
  console.log(`jest: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests} skipped`);
' "$report" || true
rm -f "$report"
exit "$status"
