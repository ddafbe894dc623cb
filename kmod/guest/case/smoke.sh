# The kernel case's loop in short: a policy (/xsie/policy.sh) retunes BLK_MAX_REQUEST_COUNT from
# the disks' windows while the load moves from the slow disk to the fast one; the plug then
# flushes at the value it chose last.
. /xsie/lib.sh
. /xsie/case/lib.sh
case_arm
case_disks 200000 16
CASE_TAG=smoke case_policy &
policy=$!
echo "XSIE-PHASE slow $($XSIECTL clock)"
case_load nullb0 32 60000 > /dev/null
echo "XSIE-PHASE fast $($XSIECTL clock)"
case_load nullb1 32 150000 > /dev/null
echo "XSIE-PHASE end $($XSIECTL clock)"
kill $policy
wait $policy 2> /dev/null
$XSIECTL wait "$BLK" 3000 > /dev/null
echo "XSIE-DEPTH $(plug_depth 256)"
case_set 32
$XSIECTL disarm "$BLK"
