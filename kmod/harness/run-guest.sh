#!/usr/bin/env bash
# run-guest.sh KERNEL_ENV INITRAMFS CONSOLE_LOG [TIMEOUT_S]
# Boots Debian's kernel under qemu-system-x86_64 (TCG, 2 vCPUs) with the initramfs, the serial
# console written to CONSOLE_LOG. Exits 0 when the guest reached XSIE-DONE and powered off.
set -euo pipefail
kenv=$1 initrd=$2 log=$3 limit=${4:-420}
# shellcheck disable=SC1090
. "$kenv"
rc=0
timeout --kill-after=10 "$limit" qemu-system-x86_64 \
	-machine pc -accel tcg -cpu max -smp 2 -m 1024 \
	-kernel "$KERNEL_VMLINUZ" -initrd "$initrd" \
	-append "console=ttyS0 panic=-1 loglevel=4 rdinit=/init" \
	-nographic -no-reboot -monitor none -serial "file:$log" || rc=$?
grep -q '^XSIE-DONE' "$log" || { echo "run-guest: guest did not finish (qemu rc=$rc)" >&2; exit 1; }
