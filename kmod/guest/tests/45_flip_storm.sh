# Value flips of BLK_MAX_REQUEST_COUNT as fast as they complete while plug loads run on two disks:
# every flip places and removes the entry/exit monitors of the safe spans in functions the load
# is inside all the time. The kernel must neither oops nor warn; flips must keep completing.
. /xsie/lib.sh
. /xsie/case/lib.sh
STORM_S=${STORM_S:-20}
case_arm
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
check flip_storm_flips "$flips flips, $refused refused in ${STORM_S}s" [ "$flips" -gt 0 ]
