// SPDX-License-Identifier: MIT
/* sched family, user side. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "observer.h"
#include "sched.h"
#include "sched.skel.h"

static struct sched_bpf *skel;
static bool target;
static struct sched_stats prev;
static uint64_t busy_prev[XT_MAX_CPUS];
static int id_switches, id_wakeups, id_runq, id_wait, id_target_runq, id_target_wait, id_busy,
	id_cpu_busy[XT_MAX_CPUS];

/* Busy ns of a CPU up to `now`, counting the task running since the last switch. */
static uint64_t busy_until(int cpu, uint64_t now)
{
	const volatile struct sched_cpu *c = &skel->bss->cpus[cpu];
	uint64_t busy = c->busy_ns, last = c->last_switch_ns;

	return busy + (c->running && last && now > last ? now - last : 0);
}

static void sched_collect(uint64_t window_ns);

static int sched_start(const struct xt_options *opt)
{
	const char *src = "raw_tp:sched_wakeup,sched_switch";
	char name[64];
	int err, cpu;

	skel = sched_bpf__open();
	if (!skel)
		return -errno;
	skel->rodata->target_tgid = opt->target_pid;
	skel->rodata->target_cgroup = opt->target_cgroup;
	if (opt->target_comm)
		strncpy((char *)skel->rodata->target_comm, opt->target_comm,
			sizeof(skel->rodata->target_comm) - 1);
	err = sched_bpf__load(skel) ?: sched_bpf__attach(skel);
	if (err)
		return err;
	target = opt->target_pid || opt->target_comm || opt->target_cgroup;
	id_switches = xt_signal_add("sched.switches", "switches", "counter", "raw_tp:sched_switch");
	id_wakeups = xt_signal_add("sched.wakeups", "wakeups", "counter", "raw_tp:sched_wakeup");
	id_runq = xt_quantiles_add("sched.runq_latency", "us", src);
	id_wait = xt_signal_add("sched.runq_wait", "us", "counter", src);
	if (target) {
		id_target_wait = xt_signal_add("sched.target.runq_wait", "us", "counter", src);
		id_target_runq = xt_quantiles_add("sched.target.runq_latency", "us", src);
	}
	id_busy = xt_signal_add("sched.busy", "cpus", "gauge", "raw_tp:sched_switch");
	for (cpu = 0; cpu < xt_nr_cpus(); cpu++) {
		snprintf(name, sizeof(name), "sched.cpu%d.busy", cpu);
		id_cpu_busy[cpu] = xt_signal_add(name, "fraction", "gauge", "raw_tp:sched_switch");
	}
	sched_collect(0);
	return 0;
}

static void sched_collect(uint64_t window_ns)
{
	struct sched_stats d;
	uint64_t now = xt_now_ns(), busy;
	double total = 0, frac;
	int cpu;

	xt_percpu_delta(skel->bss->stats, &prev, &d, sizeof(d));
	xt_emit(id_switches, d.switches);
	xt_emit(id_wakeups, d.wakeups);
	xt_emit(id_wait, d.runq_wait_ns / 1e3);
	if (target) {
		xt_emit(id_target_wait, d.target_runq_wait_ns / 1e3);
		xt_emit_quantiles(id_target_runq, d.target_runq_ns.slots, XT_HIST_SLOTS, 1e-3);
	}
	xt_emit_quantiles(id_runq, d.runq_ns.slots, XT_HIST_SLOTS, 1e-3);
	for (cpu = 0; cpu < xt_nr_cpus(); cpu++) {
		busy = busy_until(cpu, now);
		frac = busy > busy_prev[cpu] && window_ns
			       ? (double)(busy - busy_prev[cpu]) / window_ns
			       : 0;
		busy_prev[cpu] = busy;
		frac = frac > 1 ? 1 : frac;
		total += frac;
		xt_emit(id_cpu_busy[cpu], frac);
	}
	xt_emit(id_busy, total);
}

static void sched_stop(void)
{
	sched_bpf__destroy(skel);
	skel = NULL;
}

const struct xt_family sched_family = {
	.name = "sched",
	.summary = "run-queue latency p50/p99, context switches, wakeups, busy time per CPU",
	.start = sched_start,
	.collect = sched_collect,
	.stop = sched_stop,
};
