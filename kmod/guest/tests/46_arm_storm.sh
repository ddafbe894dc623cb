# BLK_MAX_REQUEST_COUNT armed (immediate, then global), flipped and disarmed again and again while
# plug loads run on two disks: every cycle places and removes every probe, in functions the load
# is inside all the time. The kernel must neither oops nor warn.
. /xsie/lib.sh
. /xsie/case/lib.sh
STORM_S=${STORM_S:-20}
ensure_xsie
load_const "$BLK" > /dev/null
storm_start arm_storm || exit 0
end=$(($(date +%s) + STORM_S))
cycles=0 flips=0 failed=0
while [ "$(date +%s)" -lt "$end" ]; do
	$XSIECTL set "$BLK" 8 > /dev/null
	mode=immediate
	[ $((cycles % 2)) = 1 ] && mode=global
	if ! $XSIECTL arm "$BLK" $mode > /dev/null; then
		failed=$((failed + 1))
		continue
	fi
	$XSIECTL wait "$BLK" 3000 > /dev/null
	for v in 4 64 16; do case_set "$v" && flips=$((flips + 1)); done
	$XSIECTL disarm "$BLK" > /dev/null || failed=$((failed + 1))
	cycles=$((cycles + 1))
done
$XSIECTL unload "$BLK"
storm_stop arm_storm
metric arm_storm_cycles "$cycles"
metric arm_storm_flips "$flips"
check arm_storm_cycles "$cycles arm/flip/disarm cycles ($flips flips, $failed failed) in ${STORM_S}s" \
	[ "$cycles" -gt 0 -a "$failed" = 0 ]
