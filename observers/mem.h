/* SPDX-License-Identifier: MIT */
/* mem family: types shared by mem.bpf.c and mem.c. */
#ifndef XOBSERVE_MEM_H
#define XOBSERVE_MEM_H

struct mem_stats {
	__u64 shrink_calls;
	__u64 shrink_to_scan; /* objects the shrinkers were asked to scan (total_scan at start) */
	__u64 shrink_freed;   /* objects they freed */
	__u64 direct_reclaims;
	__u64 direct_reclaimed_pages;
	__u64 migrated_pages;
	__u64 migrate_failed_pages;
	struct xt_hist direct_reclaim_ns;
} XT_PERCPU;

#endif
