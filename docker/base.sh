#!/usr/bin/env bash
# Makes the Debian 12 base image of xtune's images and prints its name: a minbase root file system
# from mmdebstrap, imported into podman (no container registry is needed). The tarball is cached in
# $XTUNE_CACHE/images under the newest Release date of its suites: while the mirror serves the same
# state, a second build reuses it (and the imported image).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mirror=${XTUNE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${XTUNE_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
cache=${XTUNE_CACHE:-$HOME/.cache/xtune}/images
suites=("$mirror bookworm" "$mirror bookworm-updates" "$security bookworm-security")

# The newest Date of the suites' InRelease files, in seconds since the epoch.
release_epoch() {
	local newest=0 suite url date epoch
	for suite in "${suites[@]}"; do
		url="${suite% *}/dists/${suite#* }/InRelease"
		date=$(curl -fsS --max-time 30 "$url" | sed -n 's/^Date: //p') || return 1
		[[ -n $date ]] || {
			echo "base: $url has no Date field" >&2
			return 1
		}
		epoch=$(date -u -d "$date" +%s)
		((epoch > newest)) && newest=$epoch
	done
	echo "$newest"
}

mkdir -p "$cache"
exec 9>"$cache/base.lock"
flock 9 # builds running at once share one tarball

if epoch=$(release_epoch); then
	tarball=$cache/debian-bookworm-minbase-$(date -u -d "@$epoch" +%Y%m%dT%H%M%SZ).tar
else
	tarball=$(find "$cache" -maxdepth 1 -name 'debian-bookworm-minbase-*.tar' | sort | tail -1)
	[[ -n $tarball ]] || {
		echo "base: the Debian mirror $mirror is unreachable and no base tarball is cached in $cache" >&2
		exit 1
	}
	echo "base: the Debian mirror is unreachable; using the cached $tarball" >&2
fi
stamp=${tarball##*minbase-}
image=localhost/xtune-base:bookworm-${stamp%.tar}

if [[ ! -f $tarball ]]; then
	echo "base: mmdebstrap --variant=minbase bookworm -> $tarball" >&2
	sources=()
	for suite in "${suites[@]}"; do sources+=("deb $suite main"); done
	# SOURCE_DATE_EPOCH: the same mirror state gives the same bytes.
	SOURCE_DATE_EPOCH=$epoch mmdebstrap --quiet --variant=minbase --format=tar bookworm "$tarball.part" "${sources[@]}"
	mv "$tarball.part" "$tarball"
	find "$cache" -maxdepth 1 -name 'debian-bookworm-minbase-*.tar' ! -path "$tarball" -delete
fi
if ! "$here/podman.sh" image exists "$image"; then
	"$here/podman.sh" import --quiet "$tarball" "$image" >/dev/null
fi
echo "$image"
