# The recording the kernel case's policy is trained from: for each regime (disk:requests per
# io_submit) and each value of BLK_MAX_REQUEST_COUNT, a plugload running without pause and
# WINDOWS windows of the disks' counters (XSIE-WIN <sweep> <regime> <value> <features>).
# Two sweeps: "train" and "heldout" (the model card's held-out figures).
. /xsie/lib.sh
. /xsie/case/lib.sh
GRID="4 8 16 32 64 256"
REGIMES="nullb0:256 nullb0:32 nullb1:256 nullb1:16"
WINDOWS=5
case_arm
case_disks 200000 16
for sweep in train heldout; do
	for r in $REGIMES; do
		for v in $GRID; do
			case_set "$v"
			/xsie/bin/plugload "/dev/${r%:*}" "${r#*:}" 100000000 > /dev/null &
			load=$!
			case_windows "$sweep $r $v" "$WINDOWS"
			kill $load
			wait $load 2> /dev/null
		done
	done
done
case_set 32
$XSIECTL disarm "$BLK"
