# BLK_MQ_RESOURCE_DELAY and BLK_MQ_BUDGET_DELAY: the milliseconds after which blk-mq runs a hardware
# queue again when a dispatch could not proceed; blk_mq_delay_run_hw_queue(s) arms the queue's
# delayed work, so the timer_start event of delayed_work_timer_fn shows the delay in jiffies
# (msecs_to_jiffies(V); HZ=250: the compiled 3 ms is 1 jiffy). Values with an unusual jiffy count
# are set, and the check is that timers of exactly that delay (or one jiffy less: the event is
# traced a tick later at most) appear under the load while armed (within 10 s), never unarmed
# (2 s).
# - RESOURCE (blk_mq_dispatch_rq_list): the SCSI budget of a scsi_debug disk whose device queue
#   depth is 1, no I/O scheduler, four O_DIRECT readers: a request left on the dispatch list finds
#   no budget and the queue is run again after the delay.
# - BUDGET (blk_mq_do_dispatch_sched; its second span, blk_mq_do_dispatch_ctx, needs a ctx that
#   empties between its bitmap test and the dequeue: not driven here, only checked armed and
#   restored): the same disk at its own queue depth under mq-deadline, two best-effort O_DIRECT
#   readers and one idle-class reader. mq-deadline dispatches no idle-class request while a
#   best-effort one is in flight (until it has waited prio_aging_expire, 10 s), and scsi_debug holds
#   each for a jiffy: after each best-effort dispatch blk-mq asks again, the scheduler has work but
#   returns nothing, and the queue is run again after the delay.
. /xsie/lib.sh
require_consts BLK_MQ_RESOURCE_DELAY BLK_MQ_BUDGET_DELAY
ensure_xsie
M=/xsie/modules
readers() { # readers DEV FIRST N [CMD...]: readers FIRST..FIRST+N-1 of DEV (O_DIRECT, each in its
	# own MiB), each dd run under CMD, in a loop until /tmp/readers.stop
	dev=$1 first=$2 n=$3
	shift 3
	rm -f /tmp/readers.stop
	for r in $(seq "$first" $((first + n - 1))); do
		(while [ ! -e /tmp/readers.stop ]; do
			"$@" dd if="$dev" of=/dev/null bs=4k count=256 skip=$((r * 256)) iflag=direct 2> /dev/null
		done) &
	done
}
stop_readers() { touch /tmp/readers.stop; wait; }
delay_timers() { # delay_timers MS [N]: delayed-work timers of msecs_to_jiffies(MS) (or a jiffy
	# less) in a 2 s window; with N, up to N windows until some are seen
	j=$((($1 * 250 + 999) / 1000)) n=0
	for _ in $(seq "${2:-1}"); do
		echo > $TRACE/trace
		echo 1 > $TRACE/events/timer/timer_start/enable
		sleep 2
		echo 0 > $TRACE/events/timer/timer_start/enable
		n=$(grep -c "function=delayed_work_timer_fn .*timeout=\($j\|$((j - 1))\)\]" $TRACE/trace)
		[ "$n" -gt 0 ] && break
	done
	echo "$n"
}
delay_retune() { # delay_retune PREFIX CONST V1 V2: timers of V1, V2 only while armed at that value
	prefix=$1 id=$(const_id "$2") v1=$3 v2=$4
	b1=$(delay_timers "$v1")
	check "${prefix}_baseline" "delay timers of $v1 ms unarmed: $b1 (expect 0)" [ "$b1" = 0 ]
	out=$(load_const "$id") && pass "${prefix}_load" "$out" || fail "${prefix}_load" "$out"
	$XSIECTL set "$id" "$v1"
	out=$($XSIECTL arm "$id" immediate) && pass "${prefix}_arm" "$out" || fail "${prefix}_arm" "$out"
	$XSIECTL wait "$id" 3000 > /dev/null
	n1=$(delay_timers "$v1" 5)
	check "${prefix}_v$v1" "delay timers of $v1 ms with V=$v1: $n1 (expect > 0)" [ "$n1" -gt 0 ]
	# BUDGET has two spans: a change is a flip once no thread is inside them; wait for it.
	$XSIECTL set "$id" "$v2" && $XSIECTL wait "$id" 3000 > /dev/null
	n2=$(delay_timers "$v2" 5) o1=$(delay_timers "$v1")
	check "${prefix}_v$v2" "delay timers with V=$v2: $n2 of $v2 ms (expect > 0), $o1 of $v1 ms (expect 0)" \
		[ "$n2" -gt 0 -a "$o1" = 0 ]
	st=$($XSIECTL status "$id")
	echo "$st"
	check "${prefix}_applied" "probe ran the update: $st" [ "$(echo "$st" | field applied)" -gt 0 ]
	$XSIECTL disarm "$id"
	back=$(delay_timers "$v2")
	check "${prefix}_disarmed" "delay timers of $v2 ms after disarm: $back (expect 0)" [ "$back" = 0 ]
	$XSIECTL unload "$id"
	# The spans' bytes are checked again on load: this passes only if the text is byte-exact.
	out=$(load_const "$id") && pass "${prefix}_text_restored" "$out" || fail "${prefix}_text_restored" "$out"
	$XSIECTL unload "$id"
}

for m in scsi_common scsi_mod crct10dif_common crct10dif_generic crc-t10dif crc64 crc64_rocksoft_generic \
	crc64-rocksoft t10-pi sd_mod; do
	grep -q "^$(echo $m | tr - _) " /proc/modules || insmod $M/$m.ko
done
insmod $M/scsi_debug.ko dev_size_mb=16 delay=1
for i in $(seq 50); do [ -e /sys/block/sda/device/queue_depth ] && break; sleep 0.1; done
depth=$(cat /sys/block/sda/device/queue_depth 2> /dev/null)
if echo 1 > /sys/block/sda/device/queue_depth && echo none > /sys/block/sda/queue/scheduler; then
	readers /dev/sda 1 4
	delay_retune resource BLK_MQ_RESOURCE_DELAY 1236 2468
	stop_readers
else
	fail resource_setup "scsi_debug's disk sda did not appear with a settable queue depth"
fi
if echo "$depth" > /sys/block/sda/device/queue_depth && echo mq-deadline > /sys/block/sda/queue/scheduler; then
	readers /dev/sda 1 2
	readers /dev/sda 3 1 ionice -c 3
	delay_retune budget BLK_MQ_BUDGET_DELAY 1236 2468
	stop_readers
else
	fail budget_setup "scsi_debug's disk sda did not take back its queue depth $depth with mq-deadline"
fi
