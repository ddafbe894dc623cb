#!/bin/sh
# Fetch Debian 12's redis source package, the exact version and .dsc pinned here, into
# build/real/redis (XTUNE_REAL_CACHE moves it); prints the unpacked tree. See ../debian-source.sh.
set -eu
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
exec "$ROOT/experiments/real/debian-source.sh" redis "5:7.0.15-1~deb12u7" "7.0.15" \
    700c69619407c47eb51f015752bd3214256932f5e04a7f064a1fdef24c011319 "${XTUNE_REAL_CACHE:-$ROOT/build/real/redis}"
