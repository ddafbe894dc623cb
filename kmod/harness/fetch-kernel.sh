#!/usr/bin/env bash
# Fetches Debian's current amd64 kernel (image, headers, kbuild) by package name, unpacks it under
# $XTUNE_CACHE/kernel/<release>/ and prints the path of a kernel.env file describing it.
# With --source it also unpacks linux-source-6.1 and prepares it (Debian's config, gcc-12) so that
# single translation units can be compiled. Every step is done once and cached; concurrent callers
# wait on one lock.
set -euo pipefail

want_source=0
[[ "${1:-}" == "--source" ]] && want_source=1

cache="${XTUNE_CACHE:-$HOME/.cache/xtune}/kernel"
mkdir -p "$cache/debs"
exec 8>"$cache/.lock"
flock 8

log() { echo "fetch-kernel: $*" >&2; }

# linux-image-amd64 is the metapackage; its dependency names the current ABI (6.1.0-N-amd64).
image_pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [[ -z "$image_pkg" ]]; then
	apt-get update -qq >&2
	image_pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
[[ -n "$image_pkg" ]] || { log "cannot resolve linux-image-amd64's kernel package"; exit 1; }
release=${image_pkg#linux-image-}
abi=${release%-amd64}
dir="$cache/$release"
mkdir -p "$dir"

download() { # package names -> .deb files in debs/ (skipped when already there)
	local pkg
	for pkg in "$@"; do
		if ! compgen -G "$cache/debs/${pkg}_*.deb" >/dev/null; then
			log "downloading $pkg"
			(cd "$cache/debs" && apt-get download -q "$pkg" >&2 2>/dev/null) ||
				(cd "$cache/debs" && apt-get download "$pkg" >&2)
		fi
	done
}

deb_of() { ls -1 "$cache/debs/${1}_"*.deb | tail -n 1; }

if [[ ! -f "$dir/.unpacked" ]]; then
	download "$image_pkg" "linux-headers-$release" "linux-headers-$abi-common" linux-kbuild-6.1
	rm -rf "$dir/root"
	mkdir -p "$dir/root"
	for pkg in "$image_pkg" "linux-headers-$release" "linux-headers-$abi-common" linux-kbuild-6.1; do
		dpkg-deb -x "$(deb_of "$pkg")" "$dir/root"
	done
	# The headers' Makefile includes the common tree by absolute path; make it relative.
	sed -i 's|^include /usr/src/|include $(dir $(lastword $(MAKEFILE_LIST)))../|' \
		"$dir/root/usr/src/linux-headers-$release/Makefile"
	touch "$dir/.unpacked"
fi

src="$dir/src/linux-source-6.1"
if [[ $want_source == 1 && ! -f "$dir/.prepared" ]]; then
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
	touch "$dir/.prepared"
fi

cat >"$dir/kernel.env" <<ENV
KERNEL_RELEASE=$release
KERNEL_PACKAGE=$image_pkg
KERNEL_PACKAGE_VERSION=$(dpkg-deb -f "$(deb_of "$image_pkg")" Version)
KERNEL_VMLINUZ=$dir/root/boot/vmlinuz-$release
KERNEL_SYSTEM_MAP=$dir/root/boot/System.map-$release
KERNEL_CONFIG=$dir/root/boot/config-$release
KERNEL_MODULES=$dir/root/lib/modules/$release
KERNEL_HEADERS=$dir/root/usr/src/linux-headers-$release
KERNEL_SOURCE=$([[ -f "$dir/.prepared" ]] && echo "$src")
ENV
echo "$dir/kernel.env"
