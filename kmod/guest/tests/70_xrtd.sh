# xrtd's sie-kernel backend: a knob on SHRINK_BATCH. `set` journals, writes the value page and
# arms (global transition); `unregister` restores the compiled value and disarms.
. /xsie/lib.sh
require_consts SHRINK_BATCH
SHR=$(const_id SHRINK_BATCH)
SOCK=/tmp/xrtd.sock
ensure_xsie
testload_setup
load_const "$SHR" > /dev/null
mkdir -p /dev/shm /tmp/xrtd
mount -t tmpfs tmpfs /dev/shm
/xsie/bin/xrtd --socket $SOCK --state-dir /tmp/xrtd --shm xsie-test.knobs \
	--allow 'sie-kernel:xsie:*' > /tmp/xrtd.log 2>&1 &
XRTD=$!
for i in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
ctl() { /xsie/bin/linesock $SOCK "$@"; }
out=$(ctl '{"op":"register","name":"shrink_batch","backend":"sie-kernel","target":"xsie:'"$SHR"'","min":1,"max":4096}') &&
	pass xrtd_register "$out" || fail xrtd_register "$out $(cat /tmp/xrtd.log)"
$XSIECTL mark-arming "$SHR" global # xrtd arms without xsiectl
out=$(ctl '{"op":"set","name":"shrink_batch","value":32,"reason":"guest test"}') &&
	pass xrtd_set "$out" || fail xrtd_set "$out $(tail -n 3 /tmp/xrtd.log)"
$XSIECTL wait "$SHR" 3000 > /dev/null
b=$(shrink_batch)
check xrtd_effect "batch $b after xrtd set 32" [ "$b" = 32 ]
out=$(ctl '{"op":"register","name":"bad","backend":"sie-kernel","target":"xsie:63","min":1,"max":9}')
check xrtd_refuses_unloaded "$out" sh -c "echo '$out' | grep -q 'no spans loaded'"
out=$(ctl '{"op":"unregister","name":"shrink_batch"}') && pass xrtd_unregister "$out" ||
	fail xrtd_unregister "$out"
b=$(shrink_batch)
check xrtd_restored "batch $b after unregister (expect 128)" [ "$b" = 128 ]
check xrtd_disarmed "$($XSIECTL status "$SHR")" [ "$($XSIECTL status "$SHR" | field state)" = 1 ]
kill $XRTD
wait $XRTD
$XSIECTL unload "$SHR"
umount /dev/shm
