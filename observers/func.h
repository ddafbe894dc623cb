/* SPDX-License-Identifier: MIT */
/* func family: types shared by func.bpf.c and func.c. */
#ifndef XOBSERVE_FUNC_H
#define XOBSERVE_FUNC_H

#define XT_FUNC_SLOTS 8 /* = XT_MAX_FUNCS */

/*
 * Concurrency (threads inside the function, averaged over a window) is exact from four sums:
 * the time spent inside up to t is A(t) = sum(exit ts) - sum(entry ts) + (entries - exits) * t,
 * over outermost calls; the window's mean concurrency is (A(end) - A(start)) / window.
 * The sums wrap modulo 2^64, which the difference undoes.
 */
struct func_stats {
	__u64 calls; /* every entry, recursive ones included */
	__u64 outer_entries;
	__u64 outer_exits;
	__u64 entry_ns_sum;
	__u64 exit_ns_sum;
	struct xt_hist latency_ns;
} XT_PERCPU;

struct func_percpu {
	struct func_stats f[XT_FUNC_SLOTS];
};

#endif
