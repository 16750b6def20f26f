#!/usr/bin/env bash
# Installs (if needed) and starts the named peers, default all; a peer already answering is left alone.
#   test/peers/up.sh [peer ...]          install + start, progress on stderr
#   test/peers/up.sh --env [peer ...]    only print the `export` lines for the peers (nothing is started)
# With no peer named, mailpit is best effort: when it cannot be installed here the others still come up.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
all=(postgres redis moto stripe-mock keycloak mailpit)

env_only=""
if [[ "${1:-}" == "--env" ]]; then
  env_only=1
  shift
fi
explicit=""
if (($# > 0)); then
  explicit=1
  peers=("$@")
else
  peers=("${all[@]}")
fi

if [[ -n "$env_only" ]]; then
  for peer in "${peers[@]}"; do bash "$here/peer.sh" "$peer" env; done
  exit 0
fi

started=$(date +%s)
failed=()
for peer in "${peers[@]}"; do
  if ! bash "$here/peer.sh" "$peer" start; then
    if [[ -z "$explicit" && "$peer" == "mailpit" ]]; then
      echo "[peers] mailpit: unavailable on this machine; continuing without it" >&2
    else
      failed+=("$peer")
    fi
  fi
done
if ((${#failed[@]} > 0)); then
  echo "[peers] FAILED to start: ${failed[*]}" >&2
  exit 1
fi
echo "[peers] up: ${peers[*]} ($(($(date +%s) - started)) s)" >&2
