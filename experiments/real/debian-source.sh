#!/bin/sh
# debian-source.sh PACKAGE VERSION UPSTREAM DSC_SHA256 CACHE
# Fetch Debian 12's source package PACKAGE at exactly VERSION into CACHE (unpacked as
# CACHE/PACKAGE-UPSTREAM, printed), through a private sources list and apt state under CACHE/apt,
# so the host's apt configuration stays untouched. The .dsc's sha256 must be DSC_SHA256; the .dsc
# lists the sha256 of every file it unpacks, which dpkg-source checks. Idempotent: an unpacked
# tree of VERSION is kept.
set -eu
[ $# -eq 5 ] || { echo "usage: $0 PACKAGE VERSION UPSTREAM DSC_SHA256 CACHE" >&2; exit 2; }
PACKAGE="$1" VERSION="$2" UPSTREAM="$3" DSC_SHA256="$4" CACHE="$5"
TREE="$CACHE/$PACKAGE-$UPSTREAM"

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
(cd "$CACHE" && apt-get "$@" -qq --download-only source "$PACKAGE=$VERSION" 2>/dev/null)
dsc="$CACHE/${PACKAGE}_${VERSION#*:}.dsc"  # the file name carries no epoch
got="$(sha256sum "$dsc" | cut -d' ' -f1)"
[ "$got" = "$DSC_SHA256" ] || { echo "fetch: $dsc has sha256 $got, wanted $DSC_SHA256" >&2; exit 1; }
(cd "$CACHE" && dpkg-source -x "$dsc" >/dev/null 2>&1) || { echo "fetch: dpkg-source -x $dsc failed" >&2; exit 1; }
got="$(dpkg-parsechangelog -l "$TREE/debian/changelog" -SVersion)"
[ "$got" = "$VERSION" ] || { echo "fetch: got $got, wanted $VERSION" >&2; exit 1; }
echo "$TREE"
