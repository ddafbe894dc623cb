#!/bin/sh
# Fetch Debian 12's zlib source package (the exact version pinned below) into build/real/zlib,
# through a private sources list and apt state so the host's apt configuration stays untouched.
# Idempotent: an unpacked tree of the pinned version is kept. The .dsc's sha256 is checked.
set -eu
VERSION="1:1.2.13.dfsg-1"
UPSTREAM="1.2.13.dfsg"
DSC="zlib_1.2.13.dfsg-1.dsc"  # the version without its epoch
DSC_SHA256="3fa1e6b2fc525062aa88207dda52fed8e045373c809d362fe8a2bfbf7cf515a8"
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
CACHE="${XTUNE_REAL_CACHE:-$ROOT/build/real/zlib}"
TREE="$CACHE/zlib-$UPSTREAM"

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
(cd "$CACHE" && apt-get "$@" -qq --download-only source "zlib=$VERSION" 2>/dev/null)
dsc="$CACHE/$DSC"
got="$(sha256sum "$dsc" | cut -d' ' -f1)"
[ "$got" = "$DSC_SHA256" ] || { echo "fetch: $dsc has sha256 $got, wanted $DSC_SHA256" >&2; exit 1; }
# The .dsc lists the sha256 of every file it unpacks; dpkg-source checks them.
(cd "$CACHE" && dpkg-source -x "$dsc" >/dev/null 2>&1) || { echo "fetch: dpkg-source -x $dsc failed" >&2; exit 1; }
echo "$TREE"
