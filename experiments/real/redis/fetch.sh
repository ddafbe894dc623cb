#!/bin/sh
# Fetch Debian 12's redis source package (the exact version pinned below) into build/real/redis,
# through a private sources list and apt state so the host's apt configuration stays untouched.
# Idempotent: an unpacked tree of the pinned version is kept.
set -eu
VERSION="5:7.0.15-1~deb12u7"
UPSTREAM="7.0.15"
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
CACHE="${XTUNE_REAL_CACHE:-$ROOT/build/real/redis}"
TREE="$CACHE/redis-$UPSTREAM"

if [ -f "$TREE/debian/changelog" ]; then
    got="$(dpkg-parsechangelog -l "$TREE/debian/changelog" -SVersion)"
    [ "$got" = "$VERSION" ] || { echo "fetch: $TREE holds $got, not $VERSION: remove it" >&2; exit 1; }
    echo "$TREE"
    exit 0
fi
APT="$CACHE/apt"
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
echo "deb-src http://deb.debian.org/debian bookworm main" > "$APT/sources.list"
set -- -o Dir::Etc::sourcelist="$APT/sources.list" -o Dir::Etc::sourceparts=- \
    -o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache"
apt-get "$@" -qq update
(cd "$CACHE" && apt-get "$@" -qq source "redis=$VERSION" >/dev/null)
got="$(dpkg-parsechangelog -l "$TREE/debian/changelog" -SVersion)"
[ "$got" = "$VERSION" ] || { echo "fetch: got $got, wanted $VERSION" >&2; exit 1; }
echo "$TREE"
