# SHRINK_BATCH: do_shrink_slab() hands a shrinker without its own batch SHRINK_BATCH objects per
# scan call; the test shrinker records the largest nr_to_scan of a drop_caches pass.
. /xsie/lib.sh
require_consts SHRINK_BATCH
ID=$(const_id SHRINK_BATCH)
ensure_xsie
testload_setup
base=$(shrink_batch)
check shrink_baseline "batch $base (expect 128)" [ "$base" = 128 ]
out=$(load_const "$ID") && pass shrink_load "$out" || fail shrink_load "$out"
$XSIECTL set "$ID" 32
$XSIECTL arm "$ID" immediate
b32=$(shrink_batch)
check shrink_v32 "batch with V=32: $b32" [ "$b32" = 32 ]
$XSIECTL set "$ID" 512
b512=$(shrink_batch)
check shrink_v512 "batch with V=512: $b512" [ "$b512" = 512 ]
$XSIECTL disarm "$ID"
back=$(shrink_batch)
check shrink_disarmed "batch after disarm: $back" [ "$back" = 128 ]
$XSIECTL unload "$ID"
