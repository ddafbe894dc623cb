# MAX_SOFTIRQ_RESTART: a softirq pass restarts at most that many times before handing the rest to
# ksoftirqd. A self-rescheduling tasklet counts the runs of one pass (best of 15 bursts: a timer
# tick ends a pass early, as it would in a rebuilt kernel).
. /xsie/lib.sh
ID=$(const_id MAX_SOFTIRQ_RESTART)
ensure_xsie
testload_setup
best_pass() {
	best=0
	for i in $(seq 15); do
		echo 200 > $TESTLOAD/softirq
		r=$(field runs_before_deferral < $TESTLOAD/softirq)
		[ "$r" -gt "$best" ] && best=$r
	done
	echo $best
}
base=$(best_pass)
check softirq_baseline "runs per pass $base (expect 10)" [ "$base" = 10 ]
out=$(load_const "$ID") && pass softirq_load "$out" || fail softirq_load "$out"
$XSIECTL set "$ID" 3
$XSIECTL arm "$ID" immediate
r3=$(best_pass)
check softirq_v3 "runs per pass with V=3: $r3" [ "$r3" = 3 ]
$XSIECTL set "$ID" 25
r25=$(best_pass)
check softirq_v25 "runs per pass with V=25: $r25" [ "$r25" = 25 ]
$XSIECTL status "$ID"
$XSIECTL disarm "$ID"
back=$(best_pass)
check softirq_disarmed "runs per pass after disarm: $back" [ "$back" = 10 ]
$XSIECTL unload "$ID"
