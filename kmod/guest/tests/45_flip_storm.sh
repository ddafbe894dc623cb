# Value flips of BLK_MAX_REQUEST_COUNT as fast as they complete while plug loads run on two disks,
# armed per-thread (STORM_MODE): the entry/exit counters of the safe spans stay placed from arm to
# disarm and count during each flip, and the kretprobes on the functions' ftrace sites track every
# execution. The kernel must neither oops nor warn; flips must keep completing.
. /xsie/lib.sh
. /xsie/case/lib.sh
STORM_S=${STORM_S:-20}
STORM_MODE=${STORM_MODE:-per-thread}
ensure_xsie
load_const "$BLK" > /dev/null
$XSIECTL set "$BLK" 32
$XSIECTL arm "$BLK" "$STORM_MODE" > /dev/null || { fail flip_storm_arm "arm $STORM_MODE refused"; exit 0; }
storm_start flip_storm || exit 0
end=$(($(date +%s) + STORM_S))
flips=0 refused=0
while [ "$(date +%s)" -lt "$end" ]; do
	for v in 4 8 64 16 256 32; do
		if case_set "$v"; then flips=$((flips + 1)); else refused=$((refused + 1)); fi
	done
done
case_set 32
$XSIECTL disarm "$BLK"
$XSIECTL unload "$BLK"
storm_stop flip_storm
metric flip_storm_flips "$flips"
metric flip_storm_refused "$refused"
check flip_storm_flips "$flips flips, $refused refused in ${STORM_S}s ($STORM_MODE)" [ "$flips" -gt 0 ]
