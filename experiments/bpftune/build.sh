#!/usr/bin/env bash
# build.sh: builds oracle/bpftune at the pinned commit into $XTUNE_CACHE/bpftune/<commit>/ (once;
# later calls only print that directory). bpftune is a contender we run, not code of ours: its
# source comes from a clone of https://github.com/oracle/bpftune (BPFTUNE_GIT, a git directory that
# holds the commit; cloned from GitHub when unset). Debian's clang, bpftool, libbpf-dev, libcap-dev
# and libnl-3-dev/libnl-route-3-dev build it; the BPF side is compiled against the guest kernel's
# BTF (the vmlinux fetch-kernel.sh caches), so its CO-RE relocations resolve against that kernel.
set -euo pipefail
commit=d5d9f609ebe79df5e5788289c4ab51211f57bbef
here=$(cd "$(dirname "$0")" && pwd)
out="${XTUNE_CACHE:-$HOME/.cache/xtune}/bpftune/$commit"
if [[ -x "$out/src/src/bpftune" ]]; then
	echo "$out"
	exit 0
fi
kenv=$("$here/../../kmod/harness/fetch-kernel.sh")
# shellcheck disable=SC1090
. "$kenv"
vmlinux="$(dirname "$kenv")/vmlinux"
[[ -r "$vmlinux" ]] || { echo "build.sh: no guest vmlinux at $vmlinux (fetch-kernel.sh makes it)" >&2; exit 1; }
for tool in clang bpftool llvm-strip pkg-config; do
	command -v "$tool" >/dev/null || { echo "build.sh: $tool missing (apt-get install clang llvm bpftool pkg-config)" >&2; exit 1; }
done
for h in bpf/libbpf.h sys/capability.h libnl3/netlink/netlink.h libnl3/netlink/route/link.h; do
	[[ -e "/usr/include/$h" ]] || { echo "build.sh: /usr/include/$h missing (apt-get install libbpf-dev libcap-dev libnl-3-dev libnl-route-3-dev)" >&2; exit 1; }
done
tmp=$(mktemp -d "${out%/*}/.build.XXXXXX" 2>/dev/null || { mkdir -p "${out%/*}" && mktemp -d "${out%/*}/.build.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT
git_dir=${BPFTUNE_GIT:-}
if [[ -z "$git_dir" ]]; then
	git clone --quiet https://github.com/oracle/bpftune "$tmp/clone"
	git_dir="$tmp/clone"
fi
mkdir "$tmp/src"
git -C "$git_dir" archive "$commit" | tar -x -C "$tmp/src"
make -C "$tmp/src/src" -j2 VMLINUX_BTF="$vmlinux" BPFTUNE_VERSION="0.4.2-${commit:0:7}" GIT_SHA="$commit" \
	>"$tmp/build.log" 2>&1 || { tail -20 "$tmp/build.log" >&2; exit 1; }
mv "$tmp/build.log" "$tmp/src/"
rm -rf "$out"
mkdir -p "$out"
mv "$tmp/src" "$out/src"
echo "$out"
