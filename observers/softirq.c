// SPDX-License-Identifier: MIT
/* softirq family, user side. */
#include <errno.h>
#include <stdio.h>

#include "observer.h"
#include "softirq.h"
#include "softirq.skel.h"

static const char *const vectors[XT_NR_SOFTIRQS] = {
	"hi",	    "timer",   "net_tx", "net_rx",  "block",
	"irq_poll", "tasklet", "sched",	 "hrtimer", "rcu",
};

static struct softirq_bpf *skel;
static struct softirq_stats prev;
static int id_count[XT_NR_SOFTIRQS], id_time[XT_NR_SOFTIRQS];

static void softirq_collect(uint64_t window_ns)
{
	struct softirq_stats d;
	int v;

	(void)window_ns;
	xt_percpu_delta(skel->bss->stats, &prev, &d, sizeof(d));
	for (v = 0; v < XT_NR_SOFTIRQS; v++) {
		xt_emit(id_count[v], d.count[v]);
		xt_emit(id_time[v], d.time_ns[v] / 1e3);
	}
}

static int softirq_start(const struct xt_options *opt)
{
	char name[64];
	int err, v;

	(void)opt;
	skel = softirq_bpf__open_and_load();
	if (!skel)
		return -errno;
	err = softirq_bpf__attach(skel);
	if (err)
		return err;
	for (v = 0; v < XT_NR_SOFTIRQS; v++) {
		snprintf(name, sizeof(name), "softirq.%s.count", vectors[v]);
		id_count[v] = xt_signal_add(name, "softirqs", "counter", "raw_tp:softirq_exit");
		snprintf(name, sizeof(name), "softirq.%s.time", vectors[v]);
		id_time[v] =
			xt_signal_add(name, "us", "counter", "raw_tp:softirq_entry,softirq_exit");
	}
	softirq_collect(0);
	return 0;
}

static void softirq_stop(void)
{
	softirq_bpf__destroy(skel);
	skel = NULL;
}

const struct xt_family softirq_family = {
	.name = "softirq",
	.summary = "time and count per softirq vector",
	.start = softirq_start,
	.collect = softirq_collect,
	.stop = softirq_stop,
};
