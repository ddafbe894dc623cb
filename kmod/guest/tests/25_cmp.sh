# A constant that only decides a branch (`cmp $100, %edi` in the test module's testload_over):
# the cmp update offsets the register for that one instruction and restores it afterwards.
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
$XSIECTL set "$ID" 200
check cmp_v200 "V=200: over(201)=$(over 201) over(150)=$(over 150)" [ "$(over 201)$(over 150)" = 10 ]
st=$($XSIECTL status "$ID")
check cmp_int3 "a cmp span runs through int3 (post-handler): $st" [ "$(echo "$st" | field int3)" = 1 ]
$XSIECTL disarm "$ID"
check cmp_disarmed "over(101)=$(over 101) over(100)=$(over 100)" [ "$(over 101)$(over 100)" = 10 ]
$XSIECTL unload "$ID"
