/* SPDX-License-Identifier: MIT */
/* func family: types shared by func.bpf.c and func.c. */
#ifndef XOBSERVE_FUNC_H
#define XOBSERVE_FUNC_H

#define XT_FUNC_SLOTS 8 /* = XT_MAX_FUNCS */
/*
 * Eight latency histograms per CPU would not fit the .bss map (at most 4 MiB) for XT_MAX_CPUS:
 * CPUs share 64 stripes (CPU & 63); the atomic adds keep the counts exact.
 */
#define XT_FUNC_STRIPES 64
#define XT_FUNC_ARGS	4 /* argument gauges per function (--func ...:argN=NAME) */

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
	__u64 arg_sum[XT_FUNC_ARGS]; /* of the gauged arguments at every entry (signed, wrapping) */
	struct xt_hist latency_ns;
} XT_PERCPU;

struct func_percpu {
	struct func_stats f[XT_FUNC_SLOTS];
};

/*
 * The largest value of each gauged argument since the daemon last took it (an atomic exchange
 * with XT_FUNC_NO_MAX, so no value is lost between windows); not a cumulative counter.
 */
#define XT_FUNC_NO_MAX ((__s64)(-0x7fffffffffffffffLL - 1))
struct func_max {
	__s64 m[XT_FUNC_SLOTS][XT_FUNC_ARGS];
} XT_PERCPU;

#endif
