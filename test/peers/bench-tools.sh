#!/usr/bin/env bash
# nginx (the proxy baseline) and wrk (the load generator) for `npm run bench`, from Debian's packages. nginx is run
# by the benchmark itself with its own config under a temp dir; Debian's service unit is never started.
set -euo pipefail
if command -v nginx >/dev/null && command -v wrk >/dev/null; then exit 0; fi
echo "[peers] bench tools: apt-get install -y nginx-light wrk ..." >&2
as_root() { if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi; }
if ! DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq nginx-light wrk >&2; then
  as_root apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq nginx-light wrk >&2
fi
