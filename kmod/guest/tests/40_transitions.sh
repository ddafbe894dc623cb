# Transitions: per-thread (executions entered after the switch use V, one entered before finishes
# with the old value), global (switch when no thread is inside a safe span: one stop_machine count,
# then self-converging refcounts), later changes in each mode (flips), and unloading the module
# while a global transition waits.
. /xsie/lib.sh
require_consts BLK_MAX_REQUEST_COUNT SHRINK_BATCH MAX_SOFTIRQ_RESTART
BLK=$(const_id BLK_MAX_REQUEST_COUNT)
SHR=$(const_id SHRINK_BATCH)
SIRQ=$(const_id MAX_SOFTIRQ_RESTART)
ensure_xsie
nullb_setup
testload_setup

# per-thread: a drop_caches thread parks inside do_shrink_slab before the arm, having read
# SHRINK_BATCH (128) at the function's start; released after the switch, that execution keeps
# scanning in batches of 128 until it leaves, and a drop_caches entered after the switch scans in
# batches of V = 32. The kretprobe on do_shrink_slab sits on its ftrace site.
load_const "$SHR" > /dev/null
$XSIECTL set "$SHR" 32
park_in_shrinker
if $XSIECTL arm "$SHR" per-thread > /dev/null; then
	unpark
	b=$(field max_nr_to_scan < "$TESTLOAD"/shrinker)
	check per_thread_old_execution "batch $b in the execution entered before the switch (expect 128)" [ "$b" = 128 ]
	b=$(shrink_batch)
	st=$($XSIECTL status "$SHR")
	check per_thread_new_execution "batch $b in an execution entered after the switch (expect 32): $st" \
		[ "$b" = 32 -a "$(echo "$st" | field state)" = 3 ]
	$XSIECTL disarm "$SHR"
	b=$(shrink_batch)
	check per_thread_disarmed "batch $b after disarm (expect 128)" [ "$b" = 128 ]
else
	unpark
	fail per_thread_old_execution "per-thread arm refused: $(dmesg | tail -n 1)"
fi
$XSIECTL unload "$SHR"

# global with nobody inside: complete inside the one stop_machine. handle_softirqs has an
# out-of-line part (handle_softirqs.cold): the stack scan counts frames there as inside.
dmesg -c > /dev/null
load_const "$SIRQ" > /dev/null
cold=$(dmesg | grep 'safe span handle_softirqs includes handle_softirqs.cold')
check global_cold_part "${cold:-no .cold part found}" [ -n "$cold" ]
out=$($XSIECTL arm "$SIRQ" global)
st=$($XSIECTL wait "$SIRQ" 2000)
check global_idle_complete "$st" [ "$(echo "$st" | field state)" = 3 ]
metric transition_ns_global_idle "$(echo "$st" | field transition_ns)"
metric arm_ns_global "$(echo "$out" | field arm_ns)"
$XSIECTL disarm "$SIRQ" && $XSIECTL unload "$SIRQ"

# An exit probe on a conditional jump cannot tell whether the thread leaves: global is refused.
jcc=$(sed -n 's/^# jcc handle_softirqs //p' /xsie/spans.txt)
grep -E "^(kernel |(span|range) $SIRQ )" /xsie/spans.txt > /tmp/cond.txt
echo "$(grep "^safe $SIRQ " /xsie/spans.txt),$jcc" >> /tmp/cond.txt
dmesg -c > /dev/null
$XSIECTL load /tmp/cond.txt > /dev/null
if $XSIECTL arm "$SIRQ" global > /dev/null 2>&1; then
	fail global_conditional_exit_refused "armed with a conditional exit at +$jcc"
	$XSIECTL disarm "$SIRQ"
else
	check global_conditional_exit_refused "$(dmesg | grep 'conditional exit' | tail -n 1)" \
		dmesg_has "handle_softirqs+$jcc is a conditional exit"
fi
$XSIECTL unload "$SIRQ"

# global with a thread parked inside do_shrink_slab: pending until it leaves.
load_const "$SHR" > /dev/null
$XSIECTL set "$SHR" 32
park_in_shrinker
$XSIECTL arm "$SHR" global
sleep 0.3
st=$($XSIECTL status "$SHR")
check global_waits "pending while a thread is inside: $st" \
	[ "$(echo "$st" | field state)" = 2 -a "$(echo "$st" | field inside)" -ge 1 ]
unpark
st=$($XSIECTL wait "$SHR" 3000)
check global_converges "$st" [ "$(echo "$st" | field state)" = 3 ]
metric transition_ns_global_parked "$(echo "$st" | field transition_ns)"
b=$(shrink_batch)
check global_effect "batch $b with V=32 after the global transition" [ "$b" = 32 ]
$XSIECTL disarm "$SHR"

# Later changes, in each mode: BLK_MAX_REQUEST_COUNT has two spans, so each change is a flip made
# when no thread is inside a safe span. (With a second plug load running throughout, the guest
# crashed in some runs, also before anything was armed in this test: not understood, see README.)
nspans=$(load_const "$BLK" > /dev/null && $XSIECTL status "$BLK" | field spans)
$XSIECTL unload "$BLK"
for mode in immediate global per-thread; do
	load_const "$BLK" > /dev/null
	$XSIECTL set "$BLK" 8
	$XSIECTL arm "$BLK" "$mode" > /dev/null
	$XSIECTL wait "$BLK" 3000 > /dev/null
	ok=0 n=0 seen=""
	for v in 16 64 8 128 32 16 96 8; do
		n=$((n + 1))
		$XSIECTL set "$BLK" "$v" || { seen="$seen $v:refused"; continue; }
		$XSIECTL wait "$BLK" 3000 > /dev/null || { seen="$seen $v:pending"; continue; }
		d=$(plug_depth $((v * 4)))
		seen="$seen $v:$d"
		[ "$d" = "$v" ] && ok=$((ok + 1))
	done
	st=$($XSIECTL status "$BLK")
	name=$(echo "$mode" | tr - _)
	check "later_changes_$name" "$ok of $n later changes in effect, $nspans spans (value:depth$seen)" [ "$ok" = "$n" ]
	metric "flip_ns_$name" "$(echo "$st" | field transition_ns)"
	$XSIECTL disarm "$BLK" && $XSIECTL unload "$BLK"
done
# rmmod while a global transition waits: every probe goes, the parked thread finishes normally.
park_in_shrinker
$XSIECTL arm "$SHR" global
st=$($XSIECTL status "$SHR")
rmmod xsie && pass unload_in_transition "rmmod with state $(echo "$st" | field state)" ||
	fail unload_in_transition "rmmod refused"
unpark
b=$(shrink_batch)
check unload_restores "batch $b after unload (expect 128)" [ "$b" = 128 ]
insmod /xsie/modules/xsie.ko
