#!/bin/sh
# Fetch Debian 12's zlib source package, the exact version and .dsc pinned here, into build/real/zlib
# (XTUNE_REAL_CACHE moves it); prints the unpacked tree. See ../debian-source.sh.
set -eu
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
exec "$ROOT/experiments/real/debian-source.sh" zlib "1:1.2.13.dfsg-1" "1.2.13.dfsg" \
    3fa1e6b2fc525062aa88207dda52fed8e045373c809d362fe8a2bfbf7cf515a8 "${XTUNE_REAL_CACHE:-$ROOT/build/real/zlib}"
