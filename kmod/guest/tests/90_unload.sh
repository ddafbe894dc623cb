# Unload: every probe goes, the text is byte-exact again, and the module leaves no probe behind.
. /xsie/lib.sh
ensure_xsie
BLK=$(const_id BLK_MAX_REQUEST_COUNT)
load_const "$BLK" > /dev/null
$XSIECTL arm "$BLK" immediate > /dev/null
dmesg -c > /dev/null
rmmod xsie && pass unload_armed "rmmod with an armed const" || fail unload_armed "rmmod failed"
check unload_log "$(dmesg | grep xsie | tail -n 1)" sh -c "dmesg | grep -q 'every probe removed'"
probes=$(cat /sys/kernel/debug/kprobes/list 2>/dev/null | grep -c .)
check unload_no_probes "kprobes left: $probes" [ "$probes" = 0 ]
insmod /xsie/modules/xsie.ko
out=$($XSIECTL load /xsie/spans.txt) && pass unload_text_exact "every span's bytes verify again: $out" ||
	fail unload_text_exact "$out"
rmmod xsie
