#!/bin/sh
# Build redis-server from the Debian source tree (fetch.sh) with the package's own flags
# (debian/rules: dpkg-buildflags with hardening=+all, system jemalloc, systemd, TLS).
#   build.sh                     the stock tree, once (prints the path of its redis-server)
#   build.sh HEADER OUT          redis-server with HEADER as src/server.h, every unit rebuilt
#   build.sh HEADER OUT UNIT.c   only UNIT.c compiled with HEADER, the other objects stock
# Variants are built in a copy of the stock tree seen at the stock tree's own path, so a variant
# whose HEADER equals the stock header is byte-identical to the stock binary (same build id).
# No locking here: callers take /tmp/xtune-heavy.lock around the whole analysis or build.
set -eu
HERE="$(cd "$(dirname "$0")" && pwd)"
TREE="$("$HERE/fetch.sh")"
# mkreleasehdr.sh would take the enclosing repository's HEAD as redis's git sha: hide it.
export GIT_DIR=/nonexistent
SOURCE_DATE_EPOCH="$(dpkg-parsechangelog -l "$TREE/debian/changelog" -STimestamp)"
export SOURCE_DATE_EPOCH

redis_make() {  # $1: the tree to build in; the rest: make arguments
    dir="$1"; shift
    flags() {
        (cd "$dir" && DEB_BUILD_MAINT_OPTIONS=hardening=+all \
            DEB_CFLAGS_MAINT_APPEND=-I/usr/include/liblzf \
            DEB_LDFLAGS_MAINT_APPEND="-Wl,-no-as-needed -ldl -latomic -llzf" dpkg-buildflags --get "$1")
    }
    CFLAGS="$(flags CFLAGS)" CPPFLAGS="$(flags CPPFLAGS)" LDFLAGS="$(flags LDFLAGS)" BUILD_TLS=yes \
        nice -n 10 make -C "$dir/src" -s V=1 USE_SYSTEM_JEMALLOC=yes USE_SYSTEMD=yes USE_JEMALLOC=yes "$@" >/dev/null
}

DEPS="libjemalloc-dev liblzf-dev libsystemd-dev libssl-dev pkg-config"
# shellcheck disable=SC2086
dpkg-query -W $DEPS >/dev/null 2>&1 || {
    echo "build: redis's build dependencies are missing: apt-get install $DEPS" >&2; exit 1; }

if [ "${1:-}" = --in-tree ]; then  # inside the namespace of a variant build
    redis_make "$2" redis-server
    exit 0
fi
if [ $# -eq 0 ]; then
    [ -x "$TREE/src/redis-server" ] || redis_make "$TREE" -j2 redis-server
    echo "$TREE/src/redis-server"
    exit 0
fi
HEADER="$1" OUT="$2" UNIT="${3:-}"
[ -x "$TREE/src/redis-server" ] || { echo "build: build the stock tree first ($0)" >&2; exit 1; }
W="$(mktemp -d "$(dirname "$TREE")/variant.XXXXXX")"
trap 'rm -rf "$W"' EXIT
cp -a "$TREE/src" "$W/src"
cp "$HEADER" "$W/src/server.h"
if [ -n "$UNIT" ]; then
    touch -r "$TREE/src/server.h" "$W/src/server.h"  # no other unit sees the change
    rm -f "$W/src/${UNIT%.c}.o"
fi
# Build at the stock tree's own path (the copy bind-mounted over src/ in a private mount
# namespace): paths in the debug info and the build id come out as in the stock build, and
# variants can build side by side.
# shellcheck disable=SC2016  # the inner shell expands its own arguments
unshare --mount --propagation private sh -c '
    mount --bind "$1/src" "$2/src" && "$3" --in-tree "$2"' sh "$W" "$TREE" "$0"
cp "$W/src/redis-server" "$OUT"
