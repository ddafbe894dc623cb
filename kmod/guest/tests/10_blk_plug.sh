# BLK_MAX_REQUEST_COUNT: with SIE set to 8 and 128 the plug flushes at 8 and 128 requests
# (block_unplug nr_rq), as a kernel rebuilt with those values would; back to 32 after disarm.
. /xsie/lib.sh
require_consts BLK_MAX_REQUEST_COUNT
ID=$(const_id BLK_MAX_REQUEST_COUNT)
ensure_xsie
nullb_setup || { fail blk_setup "null_blk did not load"; exit 0; }
base=$(plug_depth 256)
check blk_baseline "default flush depth $base (expect 32)" [ "$base" = 32 ]
out=$(load_const "$ID") && pass blk_load "$out" || fail blk_load "$out"
metric blk_load_ns "$(echo "$out" | field load_ns)"
$XSIECTL set "$ID" 8
out=$($XSIECTL arm "$ID" immediate) && pass blk_arm "$out" || fail blk_arm "$out"
metric blk_arm_ns "$(echo "$out" | field arm_ns)"
d8=$(plug_depth 256)
check blk_v8 "flush depth with V=8: $d8" [ "$d8" = 8 ]
$XSIECTL set "$ID" 128
d128=$(plug_depth 512)
check blk_v128 "flush depth with V=128: $d128" [ "$d128" = 128 ]
st=$($XSIECTL status "$ID")
echo "$st"
check blk_applied "probe ran the update: $st" [ "$(echo "$st" | field applied)" -gt 0 ]
metric blk_optimized_spans "$(echo "$st" | field optimized)"
check blk_jump_optimized "both spans jump-optimized: $st" [ "$(echo "$st" | field optimized)" = 2 ]
metric blk_int3_spans "$(echo "$st" | field int3)"
$XSIECTL disarm "$ID"
back=$(plug_depth 256)
check blk_disarmed "flush depth after disarm: $back (expect 32)" [ "$back" = 32 ]
$XSIECTL unload "$ID"
# The span's bytes are checked again on load: this passes only if the text is byte-exact.
out=$(load_const "$ID") && pass blk_text_restored "$out" || fail blk_text_restored "$out"
$XSIECTL unload "$ID"
