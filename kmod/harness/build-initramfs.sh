#!/usr/bin/env bash
# build-initramfs.sh KERNEL_ENV SPANS OUT.cpio.gz [TEST...]
# A busybox initramfs with xsie.ko, the test load module, the guest tools and tests, the spans
# file, and the distro modules the tests need (null_blk and its dependency configfs).
# TEST names select guest scripts by path under kmod/guest without .sh (default: tests/*).
# GUEST_FILES (space-separated paths) are copied into /xsie/ too (e.g. a trained policy).
set -euo pipefail
kenv=$1 spans=$2 out=$3
shift 3
kmod=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$kmod/../build}/kmod
# shellcheck disable=SC1090
. "$kenv"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,dev,proc,sys,tmp,xsie/bin,xsie/modules,xsie/tests}
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$kmod/guest/init" "$root/init"
cp "$kmod/guest/lib.sh" "$root/xsie/"
cp -r "$kmod/guest/case" "$root/xsie/"
for f in ${GUEST_FILES:-}; do cp "$f" "$root/xsie/"; done
if [[ $# -eq 0 ]]; then
	cp "$kmod"/guest/tests/*.sh "$root/xsie/tests/"
else
	for t in "$@"; do cp "$kmod/guest/$t.sh" "$root/xsie/tests/"; done
fi
cp "$build"/guest/{xsiectl,plugload,linesock} "$root/xsie/bin/"
# xrtd only when built (a benchmark's guest may not need it; the xrtd guest test fails without it).
[[ ! -e "$build/guest/xrtd" ]] || cp "$build/guest/xrtd" "$root/xsie/bin/"
cp "$build/xsie.ko" "$build/xsie_testload.ko" "$root/xsie/modules/"
cp "$KERNEL_MODULES/kernel/fs/configfs/configfs.ko" \
	"$KERNEL_MODULES/kernel/drivers/block/null_blk/null_blk.ko" "$root/xsie/modules/"
# scsi_debug (a SCSI disk with a per-device budget) and its dependencies: the blk-mq resource delay.
for m in drivers/scsi/{scsi_common,scsi_mod,sd_mod,scsi_debug} crypto/{crct10dif_common,crct10dif_generic} \
	lib/{crc-t10dif,crc64,crc64-rocksoft} crypto/crc64_rocksoft_generic block/t10-pi; do
	cp "$KERNEL_MODULES/kernel/$m.ko" "$root/xsie/modules/"
done
# sch_netem and iproute2's tc with its libraries (busybox tc cannot add a qdisc): the delay line of
# the TCP shift test (guest/tests/58_tcp_shifts.sh).
cp "$KERNEL_MODULES/kernel/net/sched/sch_netem.ko" "$root/xsie/modules/"
cp /usr/sbin/tc "$root/xsie/bin/"
mkdir -p "$root/lib64" "$root/lib/x86_64-linux-gnu"
cp /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
ldd /usr/sbin/tc | awk '$3 ~ /^\// { print $3 }' | xargs cp -t "$root/lib/x86_64-linux-gnu/"
cp "$spans" "$root/xsie/spans.txt"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
