# BLK_MAX_REQUEST_COUNT armed (in turn immediate, global and per-thread: STORM_MODES), flipped and
# disarmed again and again while plug loads run on two disks: every cycle places and removes every
# probe (per-thread: kretprobes on the functions' ftrace sites), in functions the load is inside
# all the time. The kernel must neither oops nor warn.
. /xsie/lib.sh
. /xsie/case/lib.sh
STORM_S=${STORM_S:-20}
STORM_MODES=${STORM_MODES:-immediate global per-thread}
ensure_xsie
load_const "$BLK" > /dev/null
storm_start arm_storm || exit 0
end=$(($(date +%s) + STORM_S))
cycles=0 flips=0 failed=0
# shellcheck disable=SC2086 # the modes are words
set -- $STORM_MODES
while [ "$(date +%s)" -lt "$end" ]; do
	$XSIECTL set "$BLK" 8 > /dev/null
	mode=$1
	shift && set -- "$@" "$mode"
	if ! $XSIECTL arm "$BLK" "$mode" > /dev/null; then
		failed=$((failed + 1))
		continue
	fi
	$XSIECTL wait "$BLK" 3000 > /dev/null
	for v in 4 64 16; do case_set "$v" && flips=$((flips + 1)); done
	$XSIECTL disarm "$BLK" > /dev/null || failed=$((failed + 1))
	cycles=$((cycles + 1))
done
$XSIECTL unload "$BLK"
# A per-thread disarm that gave up waiting for hooked executions to return (xsie.ko logs it).
late=$(dmesg | grep -c 'still inside a safe span')
storm_stop arm_storm
metric arm_storm_cycles "$cycles"
metric arm_storm_flips "$flips"
metric arm_storm_late_disarms "$late"
check arm_storm_cycles "$cycles arm/flip/disarm cycles ($STORM_MODES; $flips flips, $failed failed, $late late disarms) in ${STORM_S}s" \
	[ "$cycles" -gt 0 -a "$failed" = 0 -a "$late" = 0 ]
