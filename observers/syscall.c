// SPDX-License-Identifier: MIT
/* syscall family, user side. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "observer.h"
#include "syscall.h"
#include "syscall.skel.h"

static struct syscall_bpf *skel;
static struct syscall_stats prev;
static int id_calls, id_rate, id_errors, id_lat;

static void syscall_collect(uint64_t window_ns)
{
	struct syscall_stats d;

	xt_percpu_delta(skel->bss->stats, &prev, &d, sizeof(d));
	xt_emit(id_calls, d.calls);
	xt_emit(id_rate, window_ns ? d.calls * 1e9 / window_ns : 0);
	xt_emit(id_errors, d.errors);
	xt_emit_quantiles(id_lat, d.latency_ns.slots, XT_HIST_SLOTS, 1e-3);
}

static int syscall_start(const struct xt_options *opt)
{
	const char *src = "raw_tp:sys_enter,sys_exit";
	int err;

	skel = syscall_bpf__open();
	if (!skel)
		return -errno;
	skel->rodata->target_tgid = opt->target_pid;
	skel->rodata->self_tgid = getpid();
	if (opt->target_comm)
		strncpy((char *)skel->rodata->target_comm, opt->target_comm,
			sizeof(skel->rodata->target_comm) - 1);
	err = syscall_bpf__load(skel) ?: syscall_bpf__attach(skel);
	if (err)
		return err;
	id_calls = xt_signal_add("syscall.calls", "calls", "counter", src);
	id_rate = xt_signal_add("syscall.rate", "calls/s", "gauge", src);
	id_errors = xt_signal_add("syscall.errors", "calls", "counter", src);
	id_lat = xt_quantiles_add("syscall.latency", "us", src);
	syscall_collect(0);
	return 0;
}

static void syscall_stop(void)
{
	syscall_bpf__destroy(skel);
	skel = NULL;
}

const struct xt_family syscall_family = {
	.name = "syscall",
	.summary = "system-call rate, errors and latency p50/p99 (--pid / --comm, default all)",
	.start = syscall_start,
	.collect = syscall_collect,
	.stop = syscall_stop,
};
