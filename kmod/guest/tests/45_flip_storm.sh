# Value flips of BLK_MAX_REQUEST_COUNT as fast as they complete while plug loads run on two disks:
# every flip places and removes the entry/exit monitors of the safe spans in functions the load
# is inside all the time. The kernel must neither oops nor warn; flips must keep completing.
. /xsie/lib.sh
. /xsie/case/lib.sh
STORM_S=${STORM_S:-20}
case_arm
case_disks 200000 16 || { fail flip_storm_disks "null_blk setup failed"; exit 0; }
dmesg -c > /dev/null
(while :; do /xsie/bin/plugload /dev/nullb0 48 200 > /dev/null; done) &
l0=$!
(while :; do /xsie/bin/plugload /dev/nullb1 24 2000 > /dev/null; done) &
l1=$!
end=$(($(date +%s) + STORM_S))
flips=0 refused=0
while [ "$(date +%s)" -lt "$end" ]; do
	for v in 4 8 64 16 256 32; do
		if case_set "$v"; then flips=$((flips + 1)); else refused=$((refused + 1)); fi
	done
done
kill $l0 $l1
wait $l0 $l1 2> /dev/null
case_set 32
$XSIECTL disarm "$BLK"
$XSIECTL unload "$BLK"
# The later tests make their own standard nullb0.
echo 0 > /sys/kernel/config/nullb/nullb1/power
rmdir /sys/kernel/config/nullb/nullb1
rmmod null_blk
metric flip_storm_flips "$flips"
metric flip_storm_refused "$refused"
check flip_storm_flips "$flips flips, $refused refused in ${STORM_S}s" [ "$flips" -gt 0 ]
if dmesg | grep -qE "Oops|BUG:|WARNING:"; then
	fail flip_storm_kernel "$(dmesg | grep -m1 -E 'Oops|BUG:|WARNING:')"
else
	pass flip_storm_kernel "the kernel log is clean"
fi
