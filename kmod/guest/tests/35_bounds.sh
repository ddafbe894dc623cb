# Values outside the analysis' range of V are refused: `set` fails with the reason in the kernel
# log, and a value stored straight into the value page is never applied.
. /xsie/lib.sh
require_consts SHRINK_BATCH
ID=$(const_id SHRINK_BATCH)
ensure_xsie
testload_setup
range=$(sed -n "s/^range $ID //p" /xsie/spans.txt)
load_const "$ID" > /dev/null
$XSIECTL set "$ID" 64
$XSIECTL arm "$ID" immediate > /dev/null
dmesg -c > /dev/null
if $XSIECTL set "$ID" 0 2>/dev/null; then fail bounds_zero_refused "V=0 accepted (range $range)"; else
	check bounds_zero_refused "V=0 refused: $(dmesg | grep 'value refused' | tail -n 1)" \
		[ "$(shrink_batch)" = 64 ]
fi
$XSIECTL store "$ID" 0
got=$(shrink_batch)
check bounds_store_not_applied "V=0 stored into the value page: nr_to_scan $got (expect 64)" [ "$got" = 64 ]
nspans=$($XSIECTL status "$ID" | field spans)
$XSIECTL store "$ID" 96
got=$(shrink_batch)
if [ "$nspans" = 1 ]; then
	check bounds_store_applied "V=96 stored into the value page (one span, read once per execution): nr_to_scan $got" [ "$got" = 96 ]
else
	# Several spans: an execution must not mix values, so only a flip (set) changes it.
	check bounds_store_ignored "V=96 stored into the page of a const with $nspans spans: nr_to_scan $got (expect 64)" [ "$got" = 64 ]
	$XSIECTL set "$ID" 96 && $XSIECTL wait "$ID" 3000 > /dev/null
	got=$(shrink_batch)
	check bounds_store_applied "V=96 set (a flip): nr_to_scan $got" [ "$got" = 96 ]
fi
$XSIECTL disarm "$ID" > /dev/null
$XSIECTL unload "$ID"
# Without a range line only the compiled value is accepted.
grep -E "^(kernel |(span|safe) $ID )" /xsie/spans.txt > /tmp/norange.txt
$XSIECTL load /tmp/norange.txt > /dev/null
if $XSIECTL set "$ID" 64 2>/dev/null; then fail bounds_default_v0 "V=64 accepted without a range"; else
	pass bounds_default_v0 "without a range only the compiled value is accepted"
fi
$XSIECTL unload "$ID"
