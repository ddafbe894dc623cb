# The kernel case's loop in short: a policy (/xsie/policy.sh) retunes BLK_MAX_REQUEST_COUNT from
# the disks' windows while the load moves from the slow disk to the fast one; the plug then
# flushes at the value it chose last.
. /xsie/lib.sh
. /xsie/case/lib.sh
case_arm
# The slow disk's reads wait at least 2 ms (its completion time), far from the fast disk's
# (inline completion: a few hundred us even on a slow, loaded host), so the policy's split holds.
case_disks 2000000 16
CASE_TAG=smoke case_policy &
policy=$!
echo "XSIE-PHASE slow $($XSIECTL clock)"
case_load nullb0 32 16000 > /dev/null
echo "XSIE-PHASE fast $($XSIECTL clock)"
case_load nullb1 32 150000 > /dev/null
echo "XSIE-PHASE end $($XSIECTL clock)"
kill $policy
wait $policy 2> /dev/null
$XSIECTL wait "$BLK" 3000 > /dev/null
echo "XSIE-DEPTH $(plug_depth 256)"
case_set 32
$XSIECTL disarm "$BLK"
