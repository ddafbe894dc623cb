# NR_MAX_BATCHED_MIGRATION: migrate_pages() hands its list to migrate_pages_batch() in batches of
# at most that many pages. The guest has one NUMA node; what reaches migrate_pages there is
# compaction (/proc/sys/vm/compact_memory) of a fragmented zone: tmpfs files fill memory and every
# second one is removed. The measure, from the function tracer and the mm_migrate_pages(_start)
# events of the compacting shell: in the call that moved the most pages P, how many batches B.
# With the compiled 512, B = 1 (P is at most 480 here); with V below P, B = ceil(P / V), as in a
# kernel rebuilt with V.
. /xsie/lib.sh
require_consts NR_MAX_BATCHED_MIGRATION
ID=$(const_id NR_MAX_BATCHED_MIGRATION)
ensure_xsie
FRAG=/tmp/frag
mkdir -p $FRAG
mount -t tmpfs -o size=300m tmpfs $FRAG
fragment() { # 48 files of 4 MiB, every second one removed: movable pages spread over the zone
	rm -f $FRAG/*
	for i in $(seq 48); do dd if=/dev/zero of=$FRAG/f$i bs=64k count=64 2> /dev/null; done
	for i in $(seq 1 2 48); do rm $FRAG/f$i; done
}
batches_per_call() { # "B P": migrate_pages_batch calls B in the compaction's migrate_pages call of most pages P
	fragment
	echo > $TRACE/trace
	echo migrate_pages_batch > $TRACE/set_ftrace_filter
	echo function > $TRACE/current_tracer
	echo 1 > $TRACE/events/migrate/mm_migrate_pages_start/enable
	echo 1 > $TRACE/events/migrate/mm_migrate_pages/enable
	sh -c "echo \$\$ > $TRACE/set_ftrace_pid; echo \$\$ > $TRACE/set_event_pid; echo 1 > /proc/sys/vm/compact_memory"
	echo 0 > $TRACE/events/migrate/mm_migrate_pages_start/enable
	echo 0 > $TRACE/events/migrate/mm_migrate_pages/enable
	cp $TRACE/trace /tmp/migrate.trace # before the tracer is switched off: that clears the buffer
	echo nop > $TRACE/current_tracer
	echo > $TRACE/set_ftrace_pid
	echo > $TRACE/set_event_pid
	echo > $TRACE/set_ftrace_filter
	awk '/mm_migrate_pages_start:/ { n = 0 } / migrate_pages_batch <-/ { n++ }
		/mm_migrate_pages:/ { for (i = 1; i <= NF; i++) if ($i ~ /^nr_(succeeded|failed)=/) { split($i, kv, "="); p += kv[2] }
			if (p > P) { P = p; B = n }; p = 0 }
		END { print B + 0, P + 0 }' /tmp/migrate.trace
}
expect() { # expect V B P: B batches are what a kernel built with V makes of P pages (and P > 0)
	[ "$3" -gt 0 ] && [ "$2" = $((($3 + $1 - 1) / $1)) ]
}
set -- $(batches_per_call)
check migrate_baseline "$1 batches for the call of $2 pages (expect 1)" expect 512 "$1" "$2"
out=$(load_const "$ID") && pass migrate_load "$out" || fail migrate_load "$out"
$XSIECTL set "$ID" 8
out=$($XSIECTL arm "$ID" immediate) && pass migrate_arm "$out" || fail migrate_arm "$out"
for v in 8 3 16; do
	$XSIECTL set "$ID" "$v"
	set -- $(batches_per_call)
	check "migrate_v$v" "V=$v: $1 batches for the call of $2 pages (expect ceil($2 / $v), $2 > $v)" \
		expect "$v" "$1" "$2"
	[ "$2" -gt "$v" ] || fail "migrate_v${v}_reached" "the largest call had only $2 pages: V=$v not exercised"
done
st=$($XSIECTL status "$ID")
echo "$st"
check migrate_applied "probe ran the update: $st" [ "$(echo "$st" | field applied)" -gt 0 ]
$XSIECTL disarm "$ID"
set -- $(batches_per_call)
check migrate_disarmed "after disarm: $1 batches for the call of $2 pages (expect 1)" expect 512 "$1" "$2"
$XSIECTL unload "$ID"
# The span's bytes are checked again on load: this passes only if the text is byte-exact.
out=$(load_const "$ID") && pass migrate_text_restored "$out" || fail migrate_text_restored "$out"
$XSIECTL unload "$ID"
rm -f $FRAG/*
umount $FRAG
