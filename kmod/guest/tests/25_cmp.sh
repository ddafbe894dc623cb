# A constant that only decides a branch (`cmp $100, %edi` in the test module's testload_over):
# the compare is emulated with the new immediate (EFLAGS computed), right for every input,
# including those near the int's limits where offsetting the register would overflow.
. /xsie/lib.sh
require_consts XSIE_TESTLOAD_LIMIT
ID=$(const_id XSIE_TESTLOAD_LIMIT)
ensure_xsie
testload_setup
over() { echo "$1" > $TESTLOAD/limit; field over < $TESTLOAD/limit; }
check cmp_baseline "over(101)=$(over 101) over(100)=$(over 100)" [ "$(over 101)$(over 100)" = 10 ]
out=$(load_const "$ID") && pass cmp_load "$out" || fail cmp_load "$out"
$XSIECTL set "$ID" 10
$XSIECTL arm "$ID" immediate > /dev/null
check cmp_v10 "V=10: over(11)=$(over 11) over(10)=$(over 10) over(101)=$(over 101)" \
	[ "$(over 11)$(over 10)$(over 101)" = 101 ]
check cmp_near_limits "V=10: over(2147483597)=$(over 2147483597) over(2147483647)=$(over 2147483647)" \
	[ "$(over 2147483597)$(over 2147483647)" = 11 ]
$XSIECTL set "$ID" 200
check cmp_v200 "V=200: over(201)=$(over 201) over(150)=$(over 150)" [ "$(over 201)$(over 150)" = 10 ]
check cmp_v200_int_min "V=200: over(-2147483600)=$(over -2147483600) over(-2147483648)=$(over -2147483648)" \
	[ "$(over -2147483600)$(over -2147483648)" = 00 ]
$XSIECTL set "$ID" 2147483646
check cmp_int_max "V=2147483646: over(2147483647)=$(over 2147483647) over(2147483646)=$(over 2147483646) over(0)=$(over 0)" \
	[ "$(over 2147483647)$(over 2147483646)$(over 0)" = 100 ]
max=$(sed -n "s/^range $ID [-0-9]* //p" /xsie/spans.txt)
over=$((max + 1))
if $XSIECTL set "$ID" "$over" 2>/dev/null; then fail bounds_above_refused "V=$over accepted"; else
	check bounds_above_refused "V=$over refused (IV must fit the 32-bit compare; max $max)" \
		[ "$max" -le 2147483647 ]
fi
st=$($XSIECTL status "$ID")
check cmp_int3 "a cmp span runs through int3 (its handler moves the instruction pointer): $st" [ "$(echo "$st" | field int3)" = 1 ]
$XSIECTL disarm "$ID"
check cmp_disarmed "over(101)=$(over 101) over(100)=$(over 100)" [ "$(over 101)$(over 100)" = 10 ]
$XSIECTL unload "$ID"
