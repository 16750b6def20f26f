#!/usr/bin/env bash
# Stops the named peers (default all) that these scripts started; anything else on their ports is left alone.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if (($# > 0)); then peers=("$@"); else peers=(mailpit keycloak stripe-mock moto redis postgres); fi
status=0
for peer in "${peers[@]}"; do bash "$here/peer.sh" "$peer" stop || status=1; done
exit "$status"
