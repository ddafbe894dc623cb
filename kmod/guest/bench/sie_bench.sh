# Benchmarks inside the QEMU guest (TCG: figures are emulated time, labelled so by the host).
# Prints XSIE-METRIC lines: policy load (spans loaded and checked + probes placed), transition
# time per mode, later changes (flips), and the cost per critical-span hit, armed at the compiled value (so the kernel
# does the same work) against unarmed, alternating in one run.
. /xsie/lib.sh
BLK=$(const_id BLK_MAX_REQUEST_COUNT)
SIRQ=$(const_id MAX_SOFTIRQ_RESTART)
SHR=$(const_id SHRINK_BATCH)
ensure_xsie
nullb_setup
testload_setup
now_ns() { $XSIECTL clock; }

for c in BLK_MAX_REQUEST_COUNT MAX_SOFTIRQ_RESTART SHRINK_BATCH; do
	id=$(const_id $c)
	l=$(load_const "$id" | field load_ns)
	a=$($XSIECTL arm "$id" immediate | field arm_ns)
	metric "policy_load_ns_$c" $((l + a))
	metric "transition_ns_immediate_$c" "$($XSIECTL status "$id" | field transition_ns)"
	$XSIECTL disarm "$id" > /dev/null
done

$XSIECTL arm "$SIRQ" global > /dev/null
$XSIECTL wait "$SIRQ" 2000 > /dev/null
metric transition_ns_global_idle "$($XSIECTL status "$SIRQ" | field transition_ns)"
$XSIECTL disarm "$SIRQ" > /dev/null
park_in_shrinker
$XSIECTL arm "$SHR" global > /dev/null
sleep 0.2
unpark
$XSIECTL wait "$SHR" 3000 > /dev/null
st=$($XSIECTL status "$SHR")
metric transition_ns_global_parked_200ms "$(echo "$st" | field transition_ns)"
metric refcount_updates_global_parked "$(echo "$st" | field refcount_updates)"
$XSIECTL disarm "$SHR" > /dev/null

$XSIECTL arm "$SIRQ" per-thread > /dev/null
$XSIECTL wait "$SIRQ" 2000 > /dev/null
metric transition_ns_per_thread_idle "$($XSIECTL status "$SIRQ" | field transition_ns)"
$XSIECTL disarm "$SIRQ" > /dev/null

# Later changes of BLK (two spans: each a flip), per arming mode: `set` to in effect.
for mode in immediate per-thread; do
	$XSIECTL set "$BLK" 8
	$XSIECTL arm "$BLK" "$mode" > /dev/null
	total=0 n=0
	for v in 16 64 8 128 32 16 96 8 48 24; do
		t0=$(now_ns)
		$XSIECTL set "$BLK" "$v" && $XSIECTL wait "$BLK" 3000 > /dev/null && {
			total=$((total + $(now_ns) - t0))
			n=$((n + 1))
		}
	done
	suffix=
	[ "$mode" = per-thread ] && suffix=_per_thread
	metric "flips_in_effect$suffix" "$n"
	metric "flip_set_to_effect_ns_mean$suffix" $((total / (n > 0 ? n : 1)))
	$XSIECTL set "$BLK" 32
	$XSIECTL disarm "$BLK" > /dev/null
done

# Per-hit cost: BLK (int3 probes on blk_add_rq_to_plug) with a plugging load, and
# MAX_SOFTIRQ_RESTART (a jump-optimized probe) with softirq bursts.
blk_run() { /xsie/bin/plugload /dev/nullb0 256 40 | field ns; }
sirq_run() { t0=$(now_ns); for i in $(seq 20); do echo 2000 > $TESTLOAD/softirq; done; echo $(($(now_ns) - t0)); }
for probe in blk sirq; do
	id=$BLK
	[ $probe = sirq ] && id=$SIRQ
	off=0 on=0 hits=0
	for round in 1 2 3; do
		off=$((off + $(${probe}_run)))
		h0=$($XSIECTL status "$id" | field hits)
		$XSIECTL arm "$id" immediate > /dev/null
		sleep 0.2 # let the kprobe optimizer replace the int3 with a jump first
		on=$((on + $(${probe}_run)))
		st=$($XSIECTL status "$id")
		hits=$((hits + $(echo "$st" | field hits) - h0))
		$XSIECTL disarm "$id" > /dev/null
	done
	metric "hit_${probe}_optimized" "$(echo "$st" | field optimized)"
	metric "hit_${probe}_unarmed_ns" "$off"
	metric "hit_${probe}_armed_ns" "$on"
	metric "hit_${probe}_hits" "$hits"
done
