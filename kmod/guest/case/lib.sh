# Helpers of the kernel adaptive case (sourced after /xsie/lib.sh): two disks, the load, the const.
# nullb0 is slow: its reads complete on a timer after SLOW_NS with SLOW_DEPTH tags, so a plug
# flushed early could let it work while the rest of a round is submitted (and a value above the
# round's size leaves it idle until the whole round is in). nullb1 is fast (completion inline):
# there every extra flush is overhead. Whether either shows is measured (bench_kernel_case.py).
BLK=$(const_id BLK_MAX_REQUEST_COUNT)
case_disks() { # case_disks SLOW_NS SLOW_DEPTH: (re)create nullb0 (slow) and nullb1 (fast)
	[ -d /sys/kernel/config/nullb/nullb1 ] && { echo 0 > /sys/kernel/config/nullb/nullb1/power; rmdir /sys/kernel/config/nullb/nullb1; }
	rmmod null_blk 2>/dev/null
	insmod /xsie/modules/configfs.ko 2>/dev/null
	grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs configfs /sys/kernel/config
	insmod /xsie/modules/null_blk.ko irqmode=2 completion_nsec="$1" hw_queue_depth="$2" || return 1
	d=/sys/kernel/config/nullb/nullb1
	mkdir $d && echo 0 > $d/irqmode && echo 1024 > $d/hw_queue_depth &&
		echo 1 > $d/power || return 1
	for b in nullb0 nullb1; do
		echo mq-deadline > /sys/block/$b/queue/scheduler
		echo 1024 > /sys/block/$b/queue/nr_requests
	done
}
case_arm() { # load BLK_MAX_REQUEST_COUNT and arm it at its compiled value
	ensure_xsie
	load_const "$BLK" > /dev/null
	$XSIECTL set "$BLK" 32
	$XSIECTL arm "$BLK" immediate > /dev/null
}
case_set() { # case_set V: change the value and wait for its flip
	$XSIECTL set "$BLK" "$1" > /dev/null && $XSIECTL wait "$BLK" 3000 > /dev/null
}
# case_load DISK N REQUESTS: REQUESTS reads from /dev/DISK, N per io_submit; prints the ns it took
case_load() { /xsie/bin/plugload /dev/"$1" "$2" $(($3 / $2)) | field ns; }

# --- windows: what the policy sees, from the disks' /sys/block/*/stat (both disks summed) ---
WINDOW=${WINDOW:-0.5}
case_sample() { # "ns reads read_ticks_ms time_in_queue_ms" now
	ios=0 ticks=0 queue=0
	for b in nullb0 nullb1; do
		read -r r1 _ _ r4 _ _ _ _ _ _ in_queue _ < /sys/block/$b/stat
		ios=$((ios + r1)) ticks=$((ticks + r4)) queue=$((queue + in_queue))
	done
	echo "$($XSIECTL clock) $ios $ticks $queue"
}
# case_features T0 IOS0 TICKS0 Q0 T1 IOS1 TICKS1 Q1: sets FEATURES to the window's integer
# features "ios_per_s lat_us queue_milli" (reads per second, mean read latency in microseconds,
# mean number of reads in the disks' queues times 1000)
case_features() {
	dt=$(($5 - $1)) dios=$(($6 - $2))
	[ "$dt" -gt 0 ] || dt=1
	lat=0
	[ "$dios" -gt 0 ] && lat=$((($7 - $3) * 1000 / dios))
	FEATURES="$((dios * 1000000000 / dt)) $lat $((($8 - $4) * 1000000000 / dt))"
}
# case_windows LABEL N: N windows of the load running now, each printed as
# XSIE-WIN LABEL ios_per_s lat_us queue_milli
case_windows() {
	prev=$(case_sample)
	i=0
	while [ $i -lt "$2" ]; do
		sleep "$WINDOW"
		now=$(case_sample)
		# shellcheck disable=SC2086
		case_features $prev $now
		echo "XSIE-WIN $1 $FEATURES"
		prev=$now i=$((i + 1))
	done
}
# case_policy: until killed, each window's features go through decide() (/xsie/policy.sh, the
# trained tree compiled to shell) and a changed value is set (a set refused while the previous
# flip is pending is tried again next window). Prints XSIE-DECISION $CASE_TAG ns features decision in_effect.
case_policy() {
	. /xsie/policy.sh
	prev=$(case_sample) current=32
	while :; do
		sleep "$WINDOW"
		now=$(case_sample)
		# shellcheck disable=SC2086
		case_features $prev $now
		prev=$now
		# shellcheck disable=SC2086
		decide $FEATURES
		if [ "$DECISION" != "$current" ] && $XSIECTL set "$BLK" "$DECISION" > /dev/null 2>&1; then
			current=$DECISION
		fi
		echo "XSIE-DECISION ${CASE_TAG:-} ${now%% *} $FEATURES $DECISION $current"
	done
}

# --- storms: plug loads that keep both disks' submission paths busy while probes come and go ---
storm_start() { # storm_start NAME: the disks and two endless plug loads; 1 if the disks fail
	case_disks 200000 16 || { fail "$1_disks" "null_blk setup failed"; return 1; }
	dmesg -c > /dev/null
	rm -f /tmp/storm.stop
	(while [ ! -e /tmp/storm.stop ]; do /xsie/bin/plugload /dev/nullb0 48 200 > /dev/null; done) &
	STORM_L0=$!
	(while [ ! -e /tmp/storm.stop ]; do /xsie/bin/plugload /dev/nullb1 24 2000 > /dev/null; done) &
	STORM_L1=$!
}
storm_stop() { # storm_stop NAME: stop the loads, remove the disks (later tests make their own
	# nullb0) and check the kernel log. The loads end after their current plugload, which holds
	# the disks open until then (killing the loop would leave it running).
	touch /tmp/storm.stop
	wait "$STORM_L0" "$STORM_L1"
	echo 0 > /sys/kernel/config/nullb/nullb1/power
	rmdir /sys/kernel/config/nullb/nullb1
	rmmod null_blk
	if dmesg | grep -qE "Oops|BUG:|WARNING:"; then
		fail "$1_kernel" "$(dmesg | grep -m1 -E 'Oops|BUG:|WARNING:')"
	else
		pass "$1_kernel" "the kernel log is clean"
	fi
}
