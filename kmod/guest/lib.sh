# Helpers for the guest tests (sourced). Results go to the console as marker lines the host parses:
#   XSIE-RESULT <test> PASS|FAIL <detail>      XSIE-METRIC <key> <value>
XSIECTL=/xsie/bin/xsiectl
TRACE=/sys/kernel/tracing

pass() { echo "XSIE-RESULT $1 PASS $2"; }
fail() { echo "XSIE-RESULT $1 FAIL $2"; }
check() { # check NAME DETAIL COND...: PASS when the command COND succeeds
	name=$1 detail=$2
	shift 2
	if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}
metric() { echo "XSIE-METRIC $1 $2"; }
dmesg_has() { dmesg | grep -q "$1"; }
field() { # field KEY <<< "k=v k2=v2": the value of KEY
	tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}
counter() { # counter FILE GROUP KEY: one counter of /proc/net/netstat or /proc/net/snmp
	awk -v g="$2:" -v k="$3" '$1 == g { if (!n) { for (i = 2; i <= NF; i++) col[$i] = i; n = 1 } else print $col[k] }' "$1"
}
tcpext() { counter /proc/net/netstat TcpExt "$1"; } # tcpext KEY: one TcpExt counter
ensure_xsie() { grep -q '^xsie ' /proc/modules || insmod /xsie/modules/xsie.ko; }
const_id() { # the id of a perf-const in the spans file
	sed -n "s/^const \([0-9]*\) $1\$/\1/p" /xsie/spans.txt
}
load_const() { # load the kernel line, then the span, safe and range lines of one const id
	grep -E "^(kernel |(span|safe|range) $1 )" /xsie/spans.txt > /tmp/const-$1.txt
	$XSIECTL load /tmp/const-$1.txt
}

# --- load generators shared by the tests ---
nullb_setup() { # null_blk with an I/O scheduler: each plug flush then traces block_unplug
	[ -e /sys/block/nullb0 ] && return 0
	insmod /xsie/modules/configfs.ko 2>/dev/null
	insmod /xsie/modules/null_blk.ko hw_queue_depth=1024 || return 1
	echo mq-deadline > /sys/block/nullb0/queue/scheduler
	echo 1024 > /sys/block/nullb0/queue/nr_requests
}
plug_depth() { # plug_depth N: the most frequent block_unplug depth while plugging N requests
	echo > $TRACE/trace
	echo 1 > $TRACE/events/block/block_unplug/enable
	/xsie/bin/plugload /dev/nullb0 "$1" 4 > /tmp/plugload.out
	echo 0 > $TRACE/events/block/block_unplug/enable
	sed -n 's/.*block_unplug: \[plugload\] \([0-9]*\)$/\1/p' $TRACE/trace | sort -n | uniq -c |
		sort -k1,1n -k2,2n | tail -n 1 | awk '{print $2}'
}
TESTLOAD=/sys/kernel/debug/xsie_testload
testload_setup() { grep -q '^xsie_testload ' /proc/modules || insmod /xsie/modules/xsie_testload.ko; }
shrink_batch() { # the largest nr_to_scan do_shrink_slab gives the test shrinker in a drop_caches
	echo 100000 > $TESTLOAD/shrinker
	echo 2 > /proc/sys/vm/drop_caches
	field max_nr_to_scan < $TESTLOAD/shrinker
}
park_in_shrinker() { # a drop_caches thread waits inside do_shrink_slab until unpark
	echo 100000 > $TESTLOAD/shrinker
	echo hold > $TESTLOAD/shrinker
	(echo 2 > /proc/sys/vm/drop_caches) &
	PARKED=$!
	for i in $(seq 100); do dmesg | grep -q 'scan parked' && break; sleep 0.05; done
	dmesg -c > /dev/null
}
unpark() { echo release > $TESTLOAD/shrinker; wait $PARKED; }
retune() { # retune PREFIX ID MEASURE ORIG V...: MEASURE prints ORIG before, each V armed, ORIG after
	prefix=$1 id=$2 measure=$3 orig=$4
	shift 4
	base=$($measure)
	check "${prefix}_baseline" "$measure: $base (expect $orig)" [ "$base" = "$orig" ]
	out=$(load_const "$id") && pass "${prefix}_load" "$out" || fail "${prefix}_load" "$out"
	$XSIECTL set "$id" "$1"
	out=$($XSIECTL arm "$id" immediate) && pass "${prefix}_arm" "$out" || fail "${prefix}_arm" "$out"
	for v in "$@"; do
		$XSIECTL set "$id" "$v"
		got=$($measure)
		check "${prefix}_v$v" "$measure with V=$v: $got" [ "$got" = "$v" ]
	done
	$XSIECTL status "$id"
	$XSIECTL disarm "$id"
	back=$($measure)
	check "${prefix}_disarmed" "$measure after disarm: $back (expect $orig)" [ "$back" = "$orig" ]
	$XSIECTL unload "$id"
	# loading again checks every span's bytes against the spans file: the text is as before
	out=$(load_const "$id") && pass "${prefix}_text_restored" "$out" || fail "${prefix}_text_restored" "$out"
	$XSIECTL unload "$id"
}
require_consts() { # end the test (as a failure) unless every named perf-const is in the spans file
	for c in "$@"; do
		[ -n "$(const_id "$c")" ] || { fail "setup_$c" "$c is not in /xsie/spans.txt"; exit 0; }
	done
}
