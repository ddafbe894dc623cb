# HYSTART_DELAY_MAX: CUBIC's HyStart leaves slow start when a round's least RTT exceeds the least
# RTT seen by clamp(delay_min / 8, HYSTART_DELAY_MIN = 4 ms, HYSTART_DELAY_MAX); the span is that
# bound, computed once a round has 8 RTT samples at a window of 16 segments or more.
# Over plain loopback the span is rarely reached (segmentation offload packs a round into fewer
# than 8 ACKs), and with a short RTT delay_min / 8 is under the 4 ms floor, where TCG's RTT jitter
# decides (sch_netem `delay 10ms 4ms`: no separation). So the effect check uses a long path where
# the bound decides: sch_netem on loopback with `delay 400ms rate 8mbit` (RTT 800 ms: delay_min / 8
# = 100 ms exceeds the compiled 16 ms), HyStart's delay detection alone (hystart_detect = 2: no
# ACK-train exits), 1.5 MiB downloads. Slow start's queue at the rate limit passes 16 ms a round
# before it passes 100 ms: at the compiled 16 ms each download leaves slow start by delay at a
# window below 480 segments, at V = 1 s (threshold delay_min / 8) at 480 or more, or not at all.
# Seen in four guest runs of this script (two downloads a value each): 336-340 against 656-668; in
# one more with 3 MiB downloads, 330-336 against 575-656 (and 656 against 1296 at 16 Mbit/s); in two
# more 336-419 against 656.
# HYSTART_DELAY_MIN_SHIFT gets its effect check (shifts_hystart_effect) on the same line: with
# HYSTART_DELAY_MAX at 1 s the cap does not bind and the shift decides the threshold, V = 3
# (delay_min / 8 = 100 ms) late as V = 1 s above, V = 6 (12.5 ms) early as 16 ms. Seen in two guest
# runs (two downloads a value each): 656 against 176-336. The six downloads take about 46 s.
# It also checks that HYSTART_DELAY_MAX loads, arms, takes several values under a loopback download,
# disarms and unloads byte-exact.
. /xsie/lib.sh
require_consts HYSTART_DELAY_MAX HYSTART_DELAY_MIN_SHIFT
ID=$(const_id HYSTART_DELAY_MAX)
SH=$(const_id HYSTART_DELAY_MIN_SHIFT)
ensure_xsie
ip link set lo up mtu 1500
mkdir -p /tmp/www
dd if=/dev/zero of=/tmp/www/blob bs=64k count=64 2> /dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
downloads() { for i in 1 2 3; do timeout 30 wget -q -O /dev/null http://127.0.0.1:8080/blob; done; }
d0=$(tcpext TCPHystartDelayDetect)
out=$(load_const "$ID") && pass hystart_load "$out" || fail hystart_load "$out"
$XSIECTL set "$ID" 8000
out=$($XSIECTL arm "$ID" immediate) && pass hystart_arm "$out" || fail hystart_arm "$out"
downloads &
ok=0
for v in 4000 64000 16000 8000; do $XSIECTL set "$ID" "$v" && ok=$((ok + 1)); sleep 0.3; done
wait
check hystart_sets "4 values set under a loopback download: $ok accepted" [ "$ok" = 4 ]
st=$($XSIECTL status "$ID")
echo "$st"
metric hystart_span_hits "$(echo "$st" | field hits)"
metric hystart_delay_exits "$(($(tcpext TCPHystartDelayDetect) - d0))"
# The long path. Kept metrics off: a closed connection's ssthresh would start the next one.
dd if=/dev/zero of=/tmp/www/small bs=64k count=24 2> /dev/null
metrics_save=$(cat /proc/sys/net/ipv4/tcp_no_metrics_save)
detect_save=$(cat /sys/module/tcp_cubic/parameters/hystart_detect)
echo 1 > /proc/sys/net/ipv4/tcp_no_metrics_save
echo 2 > /sys/module/tcp_cubic/parameters/hystart_detect
insmod /xsie/modules/sch_netem.ko 2> /dev/null
seen="" shifts="" later=0 shifted=0 t0=$(cut -d. -f1 /proc/uptime)
out=$(/xsie/bin/tc qdisc add dev lo root netem delay 400ms rate 8mbit limit 100000 2>&1) ||
	seen=" sch_netem refused: $out" later=-9 shifted=-9
# Each download is HYSTART_DELAY_MAX/HYSTART_DELAY_MIN_SHIFT (the shift armed at its compiled 3):
# 16000/3 and 1000000/3 feed hystart_effect, 1000000/3 and 1000000/6 shifts_hystart_effect.
out=$(load_const "$SH") && $XSIECTL set "$SH" 3 && $XSIECTL arm "$SH" immediate > /dev/null ||
	shifts=" shift not armed: $out" shifted=-9
for run in 16000/3 1000000/3 1000000/6 16000/3 1000000/3 1000000/6; do
	v=${run%/*} n=${run#*/}
	$XSIECTL set "$ID" "$v"
	$XSIECTL set "$SH" "$n"
	d0=$(tcpext TCPHystartDelayDetect) c0=$(tcpext TCPHystartDelayCwnd)
	got=$(timeout 30 wget -q -O - http://127.0.0.1:8080/small | wc -c)
	exits=$(($(tcpext TCPHystartDelayDetect) - d0)) cwnd=$(($(tcpext TCPHystartDelayCwnd) - c0))
	early=0 late=0
	[ "$exits" = 1 ] && [ "$cwnd" -lt 480 ] && early=1
	[ "$cwnd" -ge $((480 * exits)) ] && [ "$exits" -le 1 ] && late=1
	case $run in
	16000/3) later=$((later + early)) seen="$seen V=$v:$exits/$cwnd/$got" ;;
	1000000/3)
		later=$((later + late)) shifted=$((shifted + late))
		seen="$seen V=$v:$exits/$cwnd/$got" shifts="$shifts V=$n:$exits/$cwnd/$got"
		;;
	1000000/6) shifted=$((shifted + early)) shifts="$shifts V=$n:$exits/$cwnd/$got" ;;
	esac
	[ "$got" = 1572864 ] || later=-9 shifted=-9
done
$XSIECTL disarm "$SH"
$XSIECTL unload "$SH"
/xsie/bin/tc qdisc del dev lo root
rmmod sch_netem
echo "$detect_save" > /sys/module/tcp_cubic/parameters/hystart_detect
echo "$metrics_save" > /proc/sys/net/ipv4/tcp_no_metrics_save
check hystart_effect "delay exits/window at exit/bytes per download:$seen in $(($(cut -d. -f1 /proc/uptime) - t0)) s for all six (expect V=16000 1/<480, V=1000000 0 or 1/>=480, all whole)" \
	[ "$later" = 4 ]
check shifts_hystart_effect "HYSTART_DELAY_MIN_SHIFT at HYSTART_DELAY_MAX = 1 s, delay exits/window at exit/bytes per download:$shifts (expect V=3 0 or 1/>=480, V=6 1/<480, all whole)" \
	[ "$shifted" = 4 ]
$XSIECTL disarm "$ID"
back=$($XSIECTL status "$ID")
check hystart_disarmed "status after disarm: $back" [ "$(echo "$back" | field state)" = 1 ]
$XSIECTL unload "$ID"
# The span's bytes are checked again on load: this passes only if the text is byte-exact.
out=$(load_const "$ID") && pass hystart_text_restored "$out" || fail hystart_text_restored "$out"
$XSIECTL unload "$ID"
killall httpd
rm -rf /tmp/www
ip link set lo mtu 65536
