/* SPDX-License-Identifier: MIT */
/* softirq family: types shared by softirq.bpf.c and softirq.c. */
#ifndef XOBSERVE_SOFTIRQ_H
#define XOBSERVE_SOFTIRQ_H

#define XT_NR_SOFTIRQS 10 /* HI .. RCU, as in include/linux/interrupt.h */

struct softirq_stats {
	__u64 count[XT_NR_SOFTIRQS];
	__u64 time_ns[XT_NR_SOFTIRQS];
	__u64 entry_ns; /* not a counter: when the running vector entered (user space skips it) */
} XT_PERCPU;

#endif
