# A transaction over two perf-consts switches both at one point: while a thread holds the global
# transition back (parked in SHRINK_BATCH's safe span), BLK_MAX_REQUEST_COUNT keeps its old value
# too; once it leaves, both change. Disarming one disarms both; an aborted transaction arms nothing.
. /xsie/lib.sh
require_consts BLK_MAX_REQUEST_COUNT SHRINK_BATCH MAX_SOFTIRQ_RESTART
BLK=$(const_id BLK_MAX_REQUEST_COUNT)
SHR=$(const_id SHRINK_BATCH)
ensure_xsie
nullb_setup
testload_setup
load_const "$BLK" > /dev/null
load_const "$SHR" > /dev/null
$XSIECTL set "$BLK" 8
$XSIECTL set "$SHR" 32

$XSIECTL txn-abort "$BLK" "$SHR"
check txn_abort "abort leaves both unarmed" \
	[ "$($XSIECTL status "$BLK" | field state)" = 1 -a "$($XSIECTL status "$SHR" | field state)" = 1 ]

park_in_shrinker
out=$($XSIECTL txn global "$BLK" "$SHR") && pass txn_commit "$out" || fail txn_commit "$out"
metric txn_arm_ns "$(echo "$out" | field arm_ns)"
d=$(plug_depth 256)
check txn_atomic_pending "BLK depth $d while the transaction waits (expect 32)" [ "$d" = 32 ]
unpark
$XSIECTL wait "$SHR" 3000 > /dev/null
sb=$($XSIECTL status "$BLK")
ss=$($XSIECTL status "$SHR")
check txn_same_group "one transaction: $sb / $ss" \
	[ "$(echo "$sb" | field group)" = "$(echo "$ss" | field group)" -a "$(echo "$sb" | field state)" = 3 ]
d=$(plug_depth 256)
b=$(shrink_batch)
check txn_both_applied "after the switch: BLK depth $d (8), batch $b (32)" [ "$d" = 8 -a "$b" = 32 ]
$XSIECTL disarm "$BLK"
check txn_disarm_together "disarming one disarms both" [ "$($XSIECTL status "$SHR" | field state)" = 1 ]
d=$(plug_depth 256)
b=$(shrink_batch)
check txn_restored "BLK depth $d (32), batch $b (128)" [ "$d" = 32 -a "$b" = 128 ]
$XSIECTL unload "$BLK"
$XSIECTL unload "$SHR"
