/* SPDX-License-Identifier: MIT */
/* syscall family: types shared by syscall.bpf.c and syscall.c. */
#ifndef XOBSERVE_SYSCALL_H
#define XOBSERVE_SYSCALL_H

struct syscall_stats {
	__u64 calls;
	__u64 errors;		   /* returned a negative value */
	struct xt_hist latency_ns; /* sys_enter -> sys_exit */
} XT_PERCPU;

#endif
