# The kernel case's evaluation: a shifting schedule of phases (disk:requests per io_submit:reads)
# not used in training, run once per contender (every static value of the grid, and the trained
# policy from /xsie/policy.sh) in each repetition, the contenders' order rotated per repetition.
# Prints XSIE-METRIC eval_<contender>_r<rep>_p<phase> <ns>, evlat_... <mean read latency in us>
# (/sys/block/*/stat over the phase) and the policy's XSIE-DECISION lines.
. /xsie/lib.sh
. /xsie/case/lib.sh
GRID="4 8 16 32 64 256"
SCHEDULE="nullb1:24:160000 nullb0:192:80000 nullb1:128:160000 nullb0:48:60000 nullb1:8:100000 nullb0:128:80000"
REPS=3
echo "XSIE-SCHEDULE $SCHEDULE"
case_arm
case_disks 200000 16
order="$GRID adaptive"
for rep in $(seq $REPS); do
	order="${order#* } ${order%% *}"
	for c in $order; do
		if [ "$c" = adaptive ]; then
			case_set 32
			CASE_TAG=r$rep case_policy &
			policy=$!
		else
			case_set "$c"
		fi
		i=0
		for p in $SCHEDULE; do
			i=$((i + 1)) disk=${p%%:*} rest=${p#*:}
			before=$(case_sample)
			ns=$(case_load "$disk" "${rest%%:*}" "${rest#*:}")
			# shellcheck disable=SC2046
			case_features $before $(case_sample)
			metric "eval_${c}_r${rep}_p$i" "$ns"
			metric "evlat_${c}_r${rep}_p$i" "$(echo "$FEATURES" | cut -d' ' -f2)"
		done
		if [ "$c" = adaptive ]; then
			kill $policy
			wait $policy 2> /dev/null
			$XSIECTL wait "$BLK" 3000 > /dev/null
		fi
	done
done
case_set 32
$XSIECTL disarm "$BLK"
