#!/usr/bin/env bash
# Fetches the Debian amd64 kernel that kernel.pin names (image, headers, kbuild; each .deb checked
# against its SHA-256 there), unpacks it under $XTUNE_CACHE/kernel/<release>/ and prints the path of
# a kernel.env file describing it. A pinned .deb apt's index no longer lists is taken from the
# archive's pool. When one of them is served by neither, it says so and uses the current kernel
# (KERNEL_PINNED=no), each package as apt's index has it. With --source it also unpacks linux-source-6.1 and
# prepares it (Debian's config, gcc-12) so that single translation units can be compiled. Every
# step is done once and cached; concurrent callers wait on one lock.
set -euo pipefail

want_source=0
[[ "${1:-}" == "--source" ]] && want_source=1

pin_file="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kernel.pin"
cache="${XTUNE_CACHE:-$HOME/.cache/xtune}/kernel"
mkdir -p "$cache/debs"
exec 8>"$cache/.lock"
flock 8

log() { echo "fetch-kernel: $*" >&2; }
fail() { log "$*"; exit 1; }

pin_field() { awk -v p="$1" -v f="$2" '$1 == p {print $f}' "$pin_file"; } # package, field -> value

apt_updated=0
apt_update() { # once; on failure (offline, not root) the lists apt already has serve
	((apt_updated)) && return 0
	apt_updated=1
	apt-get update -qq >&2 || log "apt-get update failed: going on with the package lists apt has"
}
index_has() { [[ -n "$(apt-cache show "$1=$2" 2>/dev/null)" ]]; } # package version -> listed by apt's index

# The URL of package=version in the archive's pool: Debian drops a version from its index when a
# newer one is published but keeps the file in the pool for a while, at the path of the version
# the index still lists with only the version changed.
pool_url() {
	local uri url
	uri=$(apt-get download --print-uris "$1" 2>/dev/null | awk '{print $1; exit}' | tr -d "'")
	[[ -n "$uri" ]] || return 1
	url=$(sed -E "s|/${1}_[^_/]+_([^_/]+\.deb)$|/${1}_${2#*:}_\1|" <<<"$uri")
	[[ "$url" != "$uri" ]] || return 1
	echo "$url"
}

deb_of() { ls -1 "$cache/debs/${1}_${2#*:}_"*.deb 2>/dev/null | tail -n 1; } # package version

# get package version [sha256]: the .deb into debs/ from apt's index (signed) or, with a SHA-256 to
# check it against, from the pool. Returns 1 when neither serves it; fails on a hash that differs.
get() {
	local pkg=$1 ver=$2 want=${3:-} deb got url out part
	deb=$(deb_of "$pkg" "$ver")
	if [[ -z "$deb" ]]; then
		index_has "$pkg" "$ver" || apt_update
		if index_has "$pkg" "$ver"; then
			log "downloading $pkg=$ver"
			(cd "$cache/debs" && apt-get download -q "$pkg=$ver" >&2 2>/dev/null) ||
				(cd "$cache/debs" && apt-get download "$pkg=$ver" >&2) || fail "cannot download $pkg=$ver"
		elif [[ -n "$want" ]] && url=$(pool_url "$pkg" "$ver"); then
			log "apt's index no longer lists $pkg=$ver; downloading it from the pool: $url"
			part="$cache/debs/${url##*/}.part"
			if ! out=$(cd "$cache/debs" && LC_ALL=C /usr/lib/apt/apt-helper download-file "$url" "$part" "SHA256:$want" 2>&1); then
				rm -f "$part"*
				# Only a file the pool no longer has means the pin is gone; anything else (a hash
				# that differs, the network, the disk) is an error to fix, not a reason to unpin.
				grep -q "Hash Sum mismatch" <<<"$out" && fail "$url does not have the SHA-256 $pin_file names ($want): refusing it"
				grep -q "404" <<<"$out" || fail "cannot download $url: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
				log "the pool does not serve it either"
				return 1
			fi
			mv "$part" "$cache/debs/${url##*/}" || fail "cannot move $part into place"
		else
			return 1
		fi
		deb=$(deb_of "$pkg" "$ver")
	fi
	[[ -n "$want" ]] || return 0
	got=$(sha256sum "$deb" | cut -d' ' -f1)
	[[ "$got" == "$want" ]] || fail "$deb has SHA-256 $got, $pin_file says $want: refusing it (delete the file to download it again)"
}

[[ -r "$pin_file" ]] || fail "no $pin_file"
image_pkg=$(awk '$1 ~ /^linux-image-/ {print $1; exit}' "$pin_file")
version=$(pin_field "$image_pkg" 2)
release=${image_pkg#linux-image-}
abi=${release%-amd64}
dir="$cache/$release"

# The packages this call needs, each at one version: the kernel's four, plus its source with
# --source; a step already unpacked at these versions needs nothing more.
declare -A ver
kpkgs=("$image_pkg" "linux-headers-$release" "linux-headers-$abi-common" linux-kbuild-6.1)
stamp() { local p; for p in "$@"; do printf '%s=%s ' "$p" "${ver[$p]}"; done; }
needed() {
	local p
	[[ "$(cat "$dir/.unpacked" 2>/dev/null)" == "$(stamp "${kpkgs[@]}")" ]] || echo "${kpkgs[@]}"
	((want_source)) && [[ "$(cat "$dir/.prepared" 2>/dev/null)" != "${ver[linux-source-6.1]}" ]] && echo linux-source-6.1
	return 0
}

pinned=yes
for p in $(awk '!/^#/ && NF == 3 {print $1}' "$pin_file"); do ver[$p]=$(pin_field "$p" 2); done
for p in $(needed); do
	[[ -n "${ver[$p]:-}" ]] || fail "$pin_file has no line for $p"
	get "$p" "${ver[$p]}" "$(pin_field "$p" 3)" || { pinned=no; break; }
done

if [[ $pinned == no ]]; then
	# linux-image-amd64 is the metapackage; its dependency names the current ABI (6.1.0-N-amd64).
	apt_update
	image_pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	[[ -n "$image_pkg" ]] || fail "cannot resolve linux-image-amd64's kernel package"
	version=$(apt-cache show "$image_pkg" | awk '/^Version:/ {print $2; exit}')
	log "WARNING: the pinned kernel ($(awk '$1 ~ /^linux-image-/ {print $1 "=" $2; exit}' "$pin_file")) is no longer served in full; using the current $image_pkg=$version, unpinned: figures may differ from the results measured on the pinned one (move the pin in $pin_file)"
	release=${image_pkg#linux-image-}
	abi=${release%-amd64}
	dir="$cache/$release"
	kpkgs=("$image_pkg" "linux-headers-$release" "linux-headers-$abi-common" linux-kbuild-6.1)
	ver=()
	# Headers and source come from the image's own build. kbuild holds only host tools: when its
	# build of this version is gone, another Debian revision of the same upstream version serves.
	for p in "${kpkgs[@]}" linux-source-6.1; do ver[$p]=$version; done
	if ! index_has linux-kbuild-6.1 "$version"; then
		ver[linux-kbuild-6.1]=$(apt-cache madison linux-kbuild-6.1 | awk -v up="${version%-*}-" 'index($3, up) == 1 {print $3; exit}')
		[[ -n "${ver[linux-kbuild-6.1]}" ]] || fail "apt's index has no linux-kbuild-6.1 of upstream ${version%-*}"
	fi
	for p in $(needed); do
		get "$p" "${ver[$p]}" || fail "apt's index does not serve $p=${ver[$p]}, which $image_pkg=$version needs"
	done
fi
mkdir -p "$dir"

if [[ "$(cat "$dir/.unpacked" 2>/dev/null)" != "$(stamp "${kpkgs[@]}")" ]]; then
	rm -f "$dir/.unpacked" # before the tree goes: an unpack cut short leaves no stamp
	rm -rf "$dir/root"
	mkdir -p "$dir/root"
	for p in "${kpkgs[@]}"; do
		dpkg-deb -x "$(deb_of "$p" "${ver[$p]}")" "$dir/root"
	done
	# The headers' Makefile includes the common tree by absolute path; make it relative.
	sed -i 's|^include /usr/src/|include $(dir $(lastword $(MAKEFILE_LIST)))../|' \
		"$dir/root/usr/src/linux-headers-$release/Makefile"
	stamp "${kpkgs[@]}" >"$dir/.unpacked"
fi

src="$dir/src/linux-source-6.1"
if [[ $want_source == 1 && "$(cat "$dir/.prepared" 2>/dev/null)" != "${ver[linux-source-6.1]}" ]]; then
	rm -f "$dir/.prepared"
	rm -rf "$dir/src" "$dir/srcdeb"
	mkdir -p "$dir/src" "$dir/srcdeb"
	dpkg-deb -x "$(deb_of linux-source-6.1 "${ver[linux-source-6.1]}")" "$dir/srcdeb"
	log "unpacking linux-source-6.1"
	tar -xJf "$dir"/srcdeb/usr/src/linux-source-6.1.tar.xz -C "$dir/src"
	rm -rf "$dir/srcdeb"
	cp "$dir/root/boot/config-$release" "$src/.config"
	log "preparing the source tree (olddefconfig prepare)"
	make -s -C "$src" CC=gcc-12 olddefconfig prepare >&2
	echo "${ver[linux-source-6.1]}" >"$dir/.prepared"
fi

cat >"$dir/kernel.env" <<ENV
KERNEL_RELEASE=$release
KERNEL_PACKAGE=$image_pkg
KERNEL_PACKAGE_VERSION=$version
KERNEL_PINNED=$pinned
KERNEL_VMLINUZ=$dir/root/boot/vmlinuz-$release
KERNEL_SYSTEM_MAP=$dir/root/boot/System.map-$release
KERNEL_CONFIG=$dir/root/boot/config-$release
KERNEL_MODULES=$dir/root/lib/modules/$release
KERNEL_HEADERS=$dir/root/usr/src/linux-headers-$release
KERNEL_SOURCE=$([[ "$(cat "$dir/.prepared" 2>/dev/null)" == "${ver[linux-source-6.1]}" ]] && echo "$src")
ENV
echo "$dir/kernel.env"
