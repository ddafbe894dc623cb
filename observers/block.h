/* SPDX-License-Identifier: MIT */
/* block family: types shared by block.bpf.c and block.c. */
#ifndef XOBSERVE_BLOCK_H
#define XOBSERVE_BLOCK_H

struct block_stats {
	__u64 ops;
	__u64 read_ops;
	__u64 write_ops;
	__u64 bytes;
	__u64 errors;
	__u64 merges;
	__u64 unplugs;
	__u64 unplug_requests;	   /* sum of block_unplug nr_rq */
	struct xt_hist latency_ns; /* block_rq_issue -> block_rq_complete */
} XT_PERCPU;

#endif
