# KernelX's other perf-consts in one boot, for experiments/bench_sie_kernel.py: their guest tests
# (kmod/guest/tests/55-58, copied into /xsie/ by the host as GUEST_FILES) print XSIE-RESULT lines.
for t in /xsie/5[5-8]_*.sh; do
	echo "XSIE-TEST-START $t"
	sh "$t" 2>&1
done
