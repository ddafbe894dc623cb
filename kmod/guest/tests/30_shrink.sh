# SHRINK_BATCH: do_shrink_slab() hands a shrinker without its own batch SHRINK_BATCH objects per
# scan call; the test shrinker records the largest nr_to_scan of a drop_caches pass.
. /xsie/lib.sh
require_consts SHRINK_BATCH
ID=$(const_id SHRINK_BATCH)
ensure_xsie
testload_setup
retune shrink "$ID" shrink_batch 128 32 512
