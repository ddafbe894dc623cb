# MAX_SOFTIRQ_RESTART: a softirq pass restarts at most that many times before handing the rest to
# ksoftirqd. A self-rescheduling tasklet counts the runs of one pass; the most frequent count of
# 15 bursts is taken (a timer tick ends a pass early, an interrupt's own pass adds runs, in a
# rebuilt kernel as well).
. /xsie/lib.sh
require_consts MAX_SOFTIRQ_RESTART
ID=$(const_id MAX_SOFTIRQ_RESTART)
ensure_xsie
testload_setup
pass_runs() { # the most frequent count over 15 bursts
	for i in $(seq 15); do
		echo 200 > $TESTLOAD/softirq
		field runs_before_deferral < $TESTLOAD/softirq
	done | sort -n | uniq -c | sort -k1,1n -k2,2n | tail -n 1 | awk '{print $2}'
}
retune softirq "$ID" pass_runs 10 3 25
