#!/usr/bin/env bash
# initramfs.sh BPFTUNE_DIR PARAMS OUT.cpio.gz: a busybox initramfs for Debian's kernel with bpftune (its
# binary, libbpftune and the tuner plugins where it looks for them), the host's iperf3, ip and tc
# with every shared library they load (in /opt/bin, ahead of busybox's applets of the same names), the veth and netem modules and the congestion controls bpftune loads, and guest.sh as PID 1's work.
set -euo pipefail
bt=$1/src/src params=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
kenv=$("$here/../../kmod/harness/fetch-kernel.sh")
# shellcheck disable=SC1090
. "$kenv"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,dev,proc,sys,tmp,run,mod,opt/bin,usr/lib/x86_64-linux-gnu/bpftune}
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$here/guest.sh" "$root/init"
cp "$here/lib.sh" "$root/lib.sh"
cp "$params" "$root/params"
chmod +x "$root/init"
cp "$bt/bpftune" "$root/opt/bin/"
cp "$bt/libbpftune.so.0.4.2" "$root/usr/lib/x86_64-linux-gnu/"
cp "$bt"/*_tuner.so "$root/usr/lib/x86_64-linux-gnu/bpftune/"
bins=("$root/opt/bin/bpftune" "$root"/usr/lib/x86_64-linux-gnu/bpftune/*.so)
for b in iperf3 ip tc; do
	cp "$(command -v "$b")" "$root/opt/bin/"
	bins+=("$root/opt/bin/$b")
done
# Every library the binaries load, at the path the loader resolves it from.
for lib in $(LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu" ldd "${bins[@]}" 2>/dev/null |
	awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/lib64\// {print $1}' | sort -u); do
	[[ $lib == "$root"/* ]] && continue
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done
cp "$KERNEL_MODULES/kernel/drivers/net/veth.ko" "$KERNEL_MODULES/kernel/net/sched/sch_netem.ko" "$root/mod/"
# The congestion controls bpftune's tcp_conn_tuner modprobes (cubic is built in), as on a host.
mods="$root/lib/modules/$KERNEL_RELEASE"
mkdir -p "$mods/kernel/net/ipv4"
: >"$mods/modules.dep"
cp "$KERNEL_MODULES/modules.builtin" "$mods/"
for cc in bbr htcp dctcp; do
	cp "$KERNEL_MODULES/kernel/net/ipv4/tcp_$cc.ko" "$mods/kernel/net/ipv4/"
	echo "kernel/net/ipv4/tcp_$cc.ko:" >>"$mods/modules.dep"
done
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
