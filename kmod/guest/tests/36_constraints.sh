# Constraints on V (the validation build's MULTIPLE_OF and POWER_OF_TWO on the range line): xsie.ko
# and xsiectl refuse values that break them, at `set` and in the value page, and refuse a range
# whose compiled value breaks them. SHRINK_BATCH (compiled 128) with hand-written range lines.
. /xsie/lib.sh
require_consts SHRINK_BATCH
ensure_xsie
testload_setup
ID=$(const_id SHRINK_BATCH)
with_range() { # with_range RANGE...: the const's span and safe lines, then `range ID RANGE`
	grep -E "^(kernel |(span|safe) $ID )" /xsie/spans.txt > /tmp/c.txt
	echo "range $ID $*" >> /tmp/c.txt
	$XSIECTL load /tmp/c.txt > /dev/null
}
with_range 1 1000 8 0
dmesg -c > /dev/null
said=$($XSIECTL set "$ID" 100 2>&1) && fail constraints_multiple_refused "100 accepted" || \
	pass constraints_multiple_refused "xsiectl: [$said] kernel: [$(dmesg | grep 'value refused' | tail -n 1)]"
$XSIECTL set "$ID" 64 && pass constraints_multiple_accepted "64 accepted" || fail constraints_multiple_accepted "64 refused"
$XSIECTL arm "$ID" immediate > /dev/null
got=$(shrink_batch)
check constraints_applied "armed at 64: nr_to_scan $got" [ "$got" = 64 ]
$XSIECTL store "$ID" 100
got=$(shrink_batch)
check constraints_store_not_applied "100 stored: nr_to_scan $got (expect 64)" [ "$got" = 64 ]
$XSIECTL store "$ID" 96
got=$(shrink_batch)
check constraints_store_applied "96 stored: nr_to_scan $got" [ "$got" = 96 ]
$XSIECTL disarm "$ID" > /dev/null
$XSIECTL unload "$ID"
with_range 1 1000 3 0 2>/tmp/err && fail constraints_v0_not_multiple "range accepted" || \
	pass constraints_v0_not_multiple "$(cat /tmp/err) kernel: [$(dmesg | grep 'range refused' | tail -n 1)]"
$XSIECTL unload "$ID" 2>/dev/null
with_range 1 1000 1 1
$XSIECTL set "$ID" 96 2>/dev/null && fail constraints_power_refused "96 accepted" || pass constraints_power_refused "96 refused"
$XSIECTL set "$ID" 256 && pass constraints_power_accepted "256 accepted" || fail constraints_power_accepted "256 refused"
$XSIECTL unload "$ID"
with_range 1 1000 8 && fail constraints_bad_line "4 fields accepted" || pass constraints_bad_line "4 fields refused"
$XSIECTL unload "$ID" 2>/dev/null
with_range 1 1000
$XSIECTL set "$ID" 100 && pass constraints_plain_range "a plain range line: 100 accepted" || fail constraints_plain_range "100 refused"
$XSIECTL unload "$ID"
rm -f /tmp/c.txt /tmp/err
