#!/usr/bin/env bash
# Fetches the Debian amd64 kernel that kernel.pin names (image, headers, kbuild; each .deb checked
# against its SHA-256 there), unpacks it under $XTUNE_CACHE/kernel/<release>/ and prints the path of
# a kernel.env file describing it. When the mirror no longer serves the pinned version, it says so
# and uses the current kernel (KERNEL_PINNED=no). With --source it also unpacks linux-source-6.1 and
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
apt_has() { # package version -> true when the mirror serves it
	apt-cache show "$1=$2" >/dev/null 2>&1 && return 0
	((apt_updated)) && return 1
	apt-get update -qq >&2 && apt_updated=1
	apt-cache show "$1=$2" >/dev/null 2>&1
}

[[ -r "$pin_file" ]] || fail "no $pin_file"
image_pkg=$(awk '$1 ~ /^linux-image-/ {print $1; exit}' "$pin_file")
version=$(pin_field "$image_pkg" 2)
pinned=yes
if ! compgen -G "$cache/debs/${image_pkg}_${version}_*.deb" >/dev/null && ! apt_has "$image_pkg" "$version"; then
	# linux-image-amd64 is the metapackage; its dependency names the current ABI (6.1.0-N-amd64).
	image_pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	[[ -n "$image_pkg" ]] || fail "cannot resolve linux-image-amd64's kernel package"
	version=$(apt-cache show "$image_pkg" | awk '/^Version:/ {print $2; exit}')
	pinned=no
	log "WARNING: the mirror no longer serves the pinned kernel ($(awk '$1 ~ /^linux-image-/ {print $1 "=" $2; exit}' "$pin_file")); using the current $image_pkg=$version, unpinned: figures may differ from the results measured on the pinned one (move the pin in $pin_file)"
fi
release=${image_pkg#linux-image-}
abi=${release%-amd64}
dir="$cache/$release"
mkdir -p "$dir"

deb_of() { ls -1 "$cache/debs/${1}_${version}_"*.deb 2>/dev/null | tail -n 1; }

download() { # package names -> .deb files of $version in debs/, checked against the pin
	local pkg deb want got
	for pkg in "$@"; do
		if [[ -z "$(deb_of "$pkg")" ]]; then
			log "downloading $pkg=$version"
			(cd "$cache/debs" && apt-get download -q "$pkg=$version" >&2 2>/dev/null) ||
				(cd "$cache/debs" && apt-get download "$pkg=$version" >&2) ||
				fail "cannot download $pkg=$version"
		fi
		[[ $pinned == yes ]] || continue
		deb=$(deb_of "$pkg")
		want=$(pin_field "$pkg" 3)
		[[ -n "$want" ]] || fail "$pin_file has no line for $pkg"
		got=$(sha256sum "$deb" | cut -d' ' -f1)
		[[ "$got" == "$want" ]] || fail "$deb has SHA-256 $got, $pin_file says $want: refusing it (delete the file to download it again)"
	done
}

if [[ "$(cat "$dir/.unpacked" 2>/dev/null)" != "$version" ]]; then
	download "$image_pkg" "linux-headers-$release" "linux-headers-$abi-common" linux-kbuild-6.1
	rm -rf "$dir/root"
	mkdir -p "$dir/root"
	for pkg in "$image_pkg" "linux-headers-$release" "linux-headers-$abi-common" linux-kbuild-6.1; do
		dpkg-deb -x "$(deb_of "$pkg")" "$dir/root"
	done
	# The headers' Makefile includes the common tree by absolute path; make it relative.
	sed -i 's|^include /usr/src/|include $(dir $(lastword $(MAKEFILE_LIST)))../|' \
		"$dir/root/usr/src/linux-headers-$release/Makefile"
	echo "$version" >"$dir/.unpacked"
fi

src="$dir/src/linux-source-6.1"
if [[ $want_source == 1 && "$(cat "$dir/.prepared" 2>/dev/null)" != "$version" ]]; then
	download linux-source-6.1
	rm -rf "$dir/src" "$dir/srcdeb"
	mkdir -p "$dir/src" "$dir/srcdeb"
	dpkg-deb -x "$(deb_of linux-source-6.1)" "$dir/srcdeb"
	log "unpacking linux-source-6.1"
	tar -xJf "$dir"/srcdeb/usr/src/linux-source-6.1.tar.xz -C "$dir/src"
	rm -rf "$dir/srcdeb"
	cp "$dir/root/boot/config-$release" "$src/.config"
	log "preparing the source tree (olddefconfig prepare)"
	make -s -C "$src" CC=gcc-12 olddefconfig prepare >&2
	echo "$version" >"$dir/.prepared"
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
KERNEL_SOURCE=$([[ -f "$dir/.prepared" ]] && echo "$src")
ENV
echo "$dir/kernel.env"
