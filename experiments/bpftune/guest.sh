#!/bin/busybox sh
# shellcheck shell=dash
# PID 1 of the bpftune guest: a TCP bulk path between the root network namespace (the iperf3
# server, the receiver) and a namespace "cli" (the iperf3 client, the sender) over one veth pair
# with a netem delay on each end, so the round trip is 2 x DELAY_MS and the socket buffers'
# limits (tcp_rmem/tcp_wmem) bound the window. Contenders, in an order rotated by one per
# repetition: `defaults` (the kernel's values, never written), `bpftune` (started from the
# defaults, its tuners loaded, one unmeasured warm-up run to learn in, then the measured run;
# stopped with its rollback) and `xtune-bo` (the receiver's tcp_rmem[2] = BO_RMEM_MAX, the
# sender's tcp_wmem[2] = BO_WMEM_MAX: the values xtune's BO picked). Each visit: warm-up,
# tcp_metrics flushed, measured run, values restored and checked against the boot snapshot.
# Results are XB- lines on the console.
/bin/busybox --install -s /bin
# busybox runs its own applets (ip, tc) ahead of PATH: the full iproute2 is named by its path.
export PATH=/opt/bin:/bin LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mkdir -p /var && ln -s /run /var/run
mount -t tmpfs tmpfs /tmp
mount -t bpf bpf /sys/fs/bpf
# shellcheck source=/dev/null
. /params # REPS RUN_S WARMUP_S DELAY_MS CONTENDERS [BO_RMEM_MAX BO_WMEM_MAX]
# shellcheck source=/dev/null
. /lib.sh
echo "XB-BOOTED $(uname -r) reps=$REPS seconds=$RUN_S warmup=$WARMUP_S delay_ms=$DELAY_MS"

fail() {
	echo "XB-ERROR $*"
	echo "XSIE-DONE"
	poweroff -f
}

insmod /mod/veth.ko || fail "insmod veth"
insmod /mod/sch_netem.ko || fail "insmod sch_netem"
# Loaded for every contender alike: bpftune's tcp_conn_tuner would load them at its start.
modprobe -a tcp_bbr tcp_htcp tcp_dctcp || fail "modprobe congestion controls"
/opt/bin/ip link set lo up
/opt/bin/ip netns add cli || fail "ip netns add"
/opt/bin/ip link add v-srv type veth peer name v-cli netns cli || fail "veth"
/opt/bin/ip addr add 10.9.0.1/24 dev v-srv
/opt/bin/ip link set v-srv up
/opt/bin/ip -n cli link set lo up
/opt/bin/ip -n cli addr add 10.9.0.2/24 dev v-cli
/opt/bin/ip -n cli link set v-cli up
# netem's default queue (1000 packets) would cap the window below the buffers' limits.
/opt/bin/tc qdisc add dev v-srv root netem delay "${DELAY_MS}ms" limit 100000 || fail "netem"
/opt/bin/tc -n cli qdisc add dev v-cli root netem delay "${DELAY_MS}ms" limit 100000 || fail "netem cli"
ping -c 2 -W 2 10.9.0.1 >/dev/null 2>&1
/opt/bin/ip netns exec cli ping -c 3 10.9.0.1 | tail -1 | sed 's/^/XB-PING /'
iperf3 -s -D -B 10.9.0.1 -1 >/dev/null 2>&1 || true
pkill iperf3
snapshot >/tmp/srv.snap
/opt/bin/ip netns exec cli sh -c ". /lib.sh; snapshot" >/tmp/cli.snap
echo "XB-DEFAULT srv $(grep -E '/(tcp_rmem|tcp_wmem)=' /tmp/srv.snap | tr '\n' ' ')"
echo "XB-DEFAULT cli $(grep -E '/(tcp_rmem|tcp_wmem)=' /tmp/cli.snap | tr '\n' ' ')"

# One iperf3 run of $1 seconds from cli; prints "kbit/s retransmits" (receiver's rate, sender's retransmits).
bulk() {
	iperf3 -s -1 -B 10.9.0.1 >/dev/null 2>&1 &
	srv=$!
	sleep 1
	/opt/bin/ip netns exec cli iperf3 -c 10.9.0.1 -t "$1" -f k >/tmp/iperf.out 2>&1
	wait "$srv"
	awk '/sender$/ {for (i = 1; i <= NF; i++) if ($i == "Kbits/sec") r = $(i + 1)}
	     /receiver$/ {for (i = 1; i <= NF; i++) if ($i == "Kbits/sec") k = $(i - 1)}
	     END {if (k == "") exit 1; print k, r}' /tmp/iperf.out
}

visit() { # contender rep
	bt=""
	if [ "$1" = bpftune ]; then
		bpftune -s -d -R >/tmp/bpftune.log 2>&1 &
		bt=$!
		n=0
		# Ready when every tuner plugin is initialised and bpftune waits on their events.
		until grep -q 'calling ring_buffer__new' /tmp/bpftune.log; do
			kill -0 "$bt" 2>/dev/null || { sed 's/^/XB-LOG /' /tmp/bpftune.log | head -40; fail "bpftune exited"; }
			n=$((n + 1))
			[ "$n" -lt 120 ] || { sed 's/^/XB-LOG /' /tmp/bpftune.log | head -40; fail "bpftune not ready in 120 s"; }
			sleep 1
		done
		echo "XB-TUNERS $2 $(grep -c 'sucessfully initialized tuner' /tmp/bpftune.log)"
		sleep 2
	elif [ "$1" = xtune-bo ]; then
		set_max /proc/sys/net/ipv4/tcp_rmem "$BO_RMEM_MAX" || fail "tcp_rmem[2] = $BO_RMEM_MAX refused"
		/opt/bin/ip netns exec cli sh -c ". /lib.sh; set_max /proc/sys/net/ipv4/tcp_wmem $BO_WMEM_MAX" ||
			fail "tcp_wmem[2] = $BO_WMEM_MAX refused"
	fi
	bulk "$WARMUP_S" >/dev/null || fail "warm-up run ($1 r$2): $(tail -3 /tmp/iperf.out)"
	/opt/bin/ip tcp_metrics flush all 2>/dev/null
	/opt/bin/ip -n cli tcp_metrics flush all 2>/dev/null
	res=$(bulk "$RUN_S") || fail "run ($1 r$2): $(tail -3 /tmp/iperf.out)"
	echo "XB-RUN $1 $2 $res"
	echo "XB-VALUES $1 $2 srv $(grep -h . /proc/sys/net/ipv4/tcp_rmem /proc/sys/net/ipv4/tcp_wmem | tr '\t\n' ', ')"
	echo "XB-VALUES $1 $2 cli $(/opt/bin/ip netns exec cli cat /proc/sys/net/ipv4/tcp_rmem /proc/sys/net/ipv4/tcp_wmem | tr '\t\n' ', ')"
	if [ -n "$bt" ]; then
		kill -TERM "$bt"
		wait "$bt"
		grep -v 'libbpf: \|caps (count\|covar for\|^$' /tmp/bpftune.log | sed "s/^/XB-LOG $2 /"
	fi
	left=$(restore /tmp/srv.snap; /opt/bin/ip netns exec cli sh -c ". /lib.sh; restore /tmp/cli.snap")
	[ -z "$left" ] || echo "$left" | sed "s/^/XB-LEFT $1 $2 /"
	echo "XB-RESTORED $1 $2 $([ -z "$left" ] && echo 1 || echo 0)"
}

rep=1
while [ "$rep" -le "$REPS" ]; do
	# shellcheck disable=SC2086 # the list is split into its words on purpose
	set -- $CONTENDERS
	order="" i=0
	while [ "$i" -lt $# ]; do
		eval "order=\"\$order \${$(((i + rep - 1) % $# + 1))}\""
		i=$((i + 1))
	done
	for c in $order; do visit "$c" "$rep"; done
	rep=$((rep + 1))
done
echo "XB-END"
echo "XSIE-DONE"
poweroff -f
