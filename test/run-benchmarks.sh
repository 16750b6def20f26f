#!/usr/bin/env bash
# `npm run bench`: the benchmark scripts (they print numbers; none of them asserts a speed). Each measures
# against a baseline taken in the same run: the gateway beside nginx over the same upstream, the gateway beside a
# direct call, ticks at growing sizes.
#   npm run bench             every benchmark
#   npm run bench -- --quick  smaller sizes, for a smoke run
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash test/peers/up.sh postgres redis moto
bash test/peers/bench-tools.sh
eval "$(bash test/peers/up.sh --env)"
npx tsc -b shared gateway services/sessions services/billing services/accounts services/auth-proxy

# The gateway runs on the Node the images run (node:24), not only on this machine's.
BENCH_GATEWAY_NODE="$(bash test/peers/node24.sh)/node"
export BENCH_GATEWAY_NODE
rows="$(mktemp -t bench-rows.XXXXXX.jsonl)"
export BENCH_RESULTS_FILE="$rows"
export BENCH_MODE="full"
[[ " $* " == *" --quick "* ]] && BENCH_MODE="quick"
for bench in gateway/bench/gateway-bench.ts services/sessions/bench/sessions-bench.ts services/sessions/bench/capacity-bench.ts \
  services/billing/bench/billing-bench.ts \
  services/accounts/bench/accounts-bench.ts; do
  echo "== ${bench}"
  npx tsx --tsconfig tsconfig.test.json "$bench" "$@"
done
npx tsx --tsconfig tsconfig.test.json test/bench/write-results.ts "$rows" bench/RESULTS.md
rm -f "$rows"
