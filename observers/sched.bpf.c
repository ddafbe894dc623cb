// SPDX-License-Identifier: GPL-2.0
/* sched family: run-queue latency, context switches and wakeups, busy time per CPU. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "xtune/observe_bpf.h"
#include "sched.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 target_tgid = 0;	  /* 0: no target process */
const volatile char target_comm[16] = {}; /* "": no target command */
const volatile __u64 target_cgroup = 0;	  /* a cgroup v2 id; 0: no target cgroup */

struct sched_stats stats[XT_MAX_CPUS];
struct sched_cpu cpus[XT_MAX_CPUS];

/* When each runnable task was queued (pid -> ns). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} queued_at SEC(".maps");

static __always_inline void queued(struct task_struct *p)
{
	__u32 pid = BPF_CORE_READ(p, pid);
	__u64 now = bpf_ktime_get_ns();

	if (pid)
		bpf_map_update_elem(&queued_at, &pid, &now, BPF_ANY);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(xo_sched_wakeup, struct task_struct *p)
{
	queued(p);
	XT_ADD(stats[xt_cpu()].wakeups, 1);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(xo_sched_wkp_new, struct task_struct *p)
{
	queued(p);
	XT_ADD(stats[xt_cpu()].wakeups, 1);
	return 0;
}

static __always_inline bool is_target(struct task_struct *t)
{
	char comm[16];

	if (target_cgroup)
		return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id) == target_cgroup;
	if (target_tgid)
		return BPF_CORE_READ(t, tgid) == target_tgid;
	if (!target_comm[0])
		return false;
	BPF_CORE_READ_STR_INTO(&comm, t, comm);
	return xt_comm_equal(comm, target_comm);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(xo_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 cpu = xt_cpu(), next_pid = BPF_CORE_READ(next, pid);
	struct sched_cpu *c = &cpus[cpu];
	__u64 now = bpf_ktime_get_ns(), *ts;

	XT_ADD(stats[cpu].switches, 1);
	/* A preempted task stays runnable: its wait starts now. */
	if (prev_state == 0)
		queued(prev);
	if (c->running && c->last_switch_ns)
		c->busy_ns += now - c->last_switch_ns;
	c->last_switch_ns = now;
	c->running = next_pid != 0;

	ts = bpf_map_lookup_elem(&queued_at, &next_pid);
	if (ts) {
		if (now > *ts) {
			xt_hist_add(&stats[cpu].runq_ns, now - *ts);
			XT_ADD(stats[cpu].runq_wait_ns, now - *ts);
			if (is_target(next)) {
				xt_hist_add(&stats[cpu].target_runq_ns, now - *ts);
				XT_ADD(stats[cpu].target_runq_wait_ns, now - *ts);
			}
		}
		bpf_map_delete_elem(&queued_at, &next_pid);
	}
	return 0;
}
