/* SPDX-License-Identifier: MIT */
/*
 * A short scheduler slice for the calling thread, for the tasks on the tick → effect path (the
 * observer's window loop, xrtd's table watcher, the SIE engine).
 *
 * Each of them sleeps most of the time and wakes for microseconds of work. Under EEVDF (Linux ≥
 * 6.6) a waking task gets a deadline of one slice (0.75 ms × (1 + log2 CPUs) by default) and does
 * not preempt a CPU-bound task whose deadline is earlier, so on a busy host each hop of the path
 * may wait for the running task's slice to end: milliseconds per hop. A custom slice (sched_runtime
 * under SCHED_OTHER, Linux ≥ 6.12, no privilege needed) gives the earlier deadline, so the wake-up
 * preempts at once; the task still gets no more CPU than its fair share.
 */
#ifndef XTUNE_SCHED_SLICE_H
#define XTUNE_SCHED_SLICE_H

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* glibc has no sched_setattr; the layout is the kernel's (uapi linux/sched/types.h). */
struct xt_sched_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
	uint32_t util_min, util_max;
};

/* The kernel accepts custom slices of 100 µs .. 100 ms. */
#define XT_SLICE_MIN_US 100u
#define XT_SLICE_MAX_US 100000u

/* SCHED_FIFO at `priority` when > 0, else SCHED_OTHER with a slice of `slice_us` (0: leave the
 * default). Returns 0 or -errno; the caller says what it falls back to. */
static inline int xt_sched_set(int priority, unsigned slice_us)
{
	struct xt_sched_attr attr = {.size = sizeof(attr)};

	if (priority > 0) {
		attr.policy = SCHED_FIFO;
		attr.priority = (uint32_t)priority;
	} else if (slice_us) {
		attr.policy = SCHED_OTHER;
		attr.runtime = (uint64_t)slice_us * 1000;
	} else {
		return 0;
	}
	return syscall(SYS_sched_setattr, 0, &attr, 0) ? -errno : 0;
}

#endif
