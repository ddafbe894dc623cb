/* SPDX-License-Identifier: MIT */
/* sched family: types shared by sched.bpf.c and sched.c. */
#ifndef XOBSERVE_SCHED_H
#define XOBSERVE_SCHED_H

struct sched_stats {
	__u64 switches;
	__u64 wakeups;
	__u64 runq_wait_ns; /* sum of the waits: / window = mean number of tasks waiting */
	struct xt_hist runq_ns;
	/* The same for the target process or command (--pid / --comm), when one is given. */
	__u64 target_runq_wait_ns;
	struct xt_hist target_runq_ns; /* wakeup (or preemption) -> running */
} XT_PERCPU;

/* Busy time accounting of one CPU: busy_ns up to last_switch_ns, plus the run since if running. */
struct sched_cpu {
	__u64 busy_ns;
	__u64 last_switch_ns;
	__u64 running; /* a non-idle task is on the CPU */
} XT_PERCPU;

#endif
