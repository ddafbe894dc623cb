#!/usr/bin/env bash
# run-guest.sh KERNEL_ENV INITRAMFS CONSOLE_LOG [TIMEOUT_S]
# Boots Debian's kernel under qemu-system-x86_64 (TCG, 2 vCPUs in one thread) with the initramfs,
# the serial console written to CONSOLE_LOG. Exits 0 when the guest reached XSIE-DONE and powered
# off.
#
# The two vCPUs run in one host thread (single-threaded TCG, round-robin): with a thread per vCPU
# (MTTCG) on a loaded 2-core host, one vCPU stopped for good in some boots (the guest showed its
# timer never firing while the other CPU waited for it: RCU stalls, a soft lockup, no finish).
# Should a boot stall anyway (no XSIE-DONE, a stall on the console), it is retried once, but only
# when its console shows that no const was armed (xsiectl prints XSIE-ARMING before every arm): a
# stall after arming may be xsie.ko's and fails the run, its console kept as CONSOLE_LOG. A retried
# boot's console is kept as CONSOLE_LOG.stalled and the retry is announced on stderr. Any other
# failure is final. no_timer_check: with one thread for both vCPUs on a loaded host, the boot's
# IO-APIC timer check can miss its ticks and panic ("IO-APIC + timer doesn't work").
set -euo pipefail
kenv=$1 initrd=$2 log=$3 limit=${4:-420}
# shellcheck disable=SC1090
. "$kenv"

stalled() {
	grep -qE 'rcu_preempt self-detected stall|soft lockup' "$log" 2>/dev/null
}

# Boots once; a guest whose console shows a soft lockup or an oops is stopped rather than left to
# the time limit (on this host no guest has come back from either); an oops gets a few seconds
# more so that its whole report reaches the console.
boot() {
	local rc=0 qemu oops=0
	: >"$log"
	timeout --kill-after=10 "$limit" qemu-system-x86_64 \
		-machine pc -accel tcg,thread=single -cpu max -smp 2 -m 1024 \
		-kernel "$KERNEL_VMLINUZ" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 loglevel=4 rdinit=/init no_timer_check" \
		-nographic -no-reboot -monitor none -serial "file:$log" >&2 &
	qemu=$!
	while kill -0 "$qemu" 2>/dev/null; do
		if grep -q 'soft lockup' "$log" || ((oops)); then
			kill "$qemu" 2>/dev/null || true
			break
		fi
		if grep -qE 'Oops: |Kernel panic' "$log"; then
			oops=1
			sleep 3
			continue
		fi
		sleep 2
	done
	wait "$qemu" || rc=$?
	echo "$rc"
}

rc=$(boot)
if ! grep -q '^XSIE-DONE' "$log" && stalled; then
	if grep -q 'XSIE-ARMING' "$log"; then
		echo "run-guest: the guest stalled after a const was armed (console in $log): not retried" >&2
		exit 1
	fi
	mv "$log" "$log.stalled"
	echo "run-guest: the guest stalled before anything was armed (console in $log.stalled);" \
		"booting again" >&2
	rc=$(boot)
fi
grep -q '^XSIE-DONE' "$log" || { echo "run-guest: guest did not finish (qemu rc=$rc)" >&2; exit 1; }
