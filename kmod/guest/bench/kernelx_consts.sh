# KernelX's perf-consts in one boot, for experiments/bench_sie_kernel.py: their guest tests
# (kmod/guest/tests/NN_*.sh, copied into /xsie/ by the host as GUEST_FILES) print XSIE-RESULT lines.
for t in /xsie/[0-9][0-9]_*.sh; do
	echo "XSIE-TEST-START $t"
	sh "$t" 2>&1
done
