#!/bin/sh
# Build libz.so.1 from the Debian source tree (fetch.sh) with the package's own flags
# (debian/rules on amd64: dpkg-buildflags, -Wall -D_REENTRANT -O3 -DUNALIGNED_OK, ./configure --shared).
#   build.sh                 the stock library, once (prints its path, a file named libz.so.1)
#   build.sh DEFLATE_C OUT   the library with DEFLATE_C as deflate.c (the other sources stock)
# Each build configures and compiles its own copy of the tree; Debian's flags map the build
# directory away (-ffile-prefix-map), so a variant whose DEFLATE_C equals the stock deflate.c is
# byte-identical to the stock library (same build id). No locking here: callers take
# /tmp/xtune-heavy.lock around an analysis or benchmark.
set -eu
HERE="$(cd "$(dirname "$0")" && pwd)"
TREE="$("$HERE/fetch.sh")"
SOURCE_DATE_EPOCH="$(dpkg-parsechangelog -l "$TREE/debian/changelog" -STimestamp)"
export SOURCE_DATE_EPOCH

build_copy() {  # $1: deflate.c to build with, $2: where the library goes
    w="$(mktemp -d "$(dirname "$TREE")/variant.XXXXXX")"
    cp -a "$TREE/." "$w/"
    cp "$1" "$w/deflate.c"
    if (cd "$w" && flags() { dpkg-buildflags --get "$1"; } &&
        CFLAGS="$(flags CFLAGS) $(flags CPPFLAGS) -Wall -D_REENTRANT -O3 -DUNALIGNED_OK" \
            LDFLAGS="$(flags LDFLAGS)" uname=GNU ./configure --shared --prefix=/usr >/dev/null &&
        nice -n 10 make -s libz.so.1.2.13 >/dev/null 2>&1); then
        cp "$w/libz.so.1.2.13" "$2"
        rc=0
    else
        echo "build: libz.so with $1 failed (in $w)" >&2
        rc=1
    fi
    rm -rf "$w"
    return $rc
}

STOCK="$(dirname "$TREE")/stock/libz.so.1"
if [ $# -eq 0 ]; then
    if [ ! -f "$STOCK" ]; then
        mkdir -p "$(dirname "$STOCK")"
        build_copy "$TREE/deflate.c" "$STOCK.tmp"
        mv "$STOCK.tmp" "$STOCK"
    fi
    echo "$STOCK"
    exit 0
fi
[ $# -eq 2 ] || { echo "usage: $0 [DEFLATE_C OUT]" >&2; exit 2; }
build_copy "$1" "$2"
