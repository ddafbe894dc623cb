// SPDX-License-Identifier: GPL-2.0
/* mem family: slab shrinking, direct reclaim latency, page migrations. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "xtune/observe_bpf.h"
#include "mem.h"

char LICENSE[] SEC("license") = "GPL";

struct mem_stats stats[XT_MAX_CPUS];

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* thread id */
	__type(value, __u64);
} reclaim_start SEC(".maps");

SEC("raw_tp/mm_shrink_slab_start")
int BPF_PROG(xo_shrink_start, struct shrinker *shr, struct shrink_control *sc, long nr_to_shrink,
	     unsigned long cache_items, unsigned long long delta, unsigned long total_scan)
{
	struct mem_stats *s = &stats[xt_cpu()];

	XT_ADD(s->shrink_calls, 1);
	XT_ADD(s->shrink_to_scan, total_scan);
	return 0;
}

SEC("raw_tp/mm_shrink_slab_end")
int BPF_PROG(xo_shrink_end, struct shrinker *shr, int nid, int freed)
{
	if (freed > 0)
		XT_ADD(stats[xt_cpu()].shrink_freed, freed);
	return 0;
}

SEC("raw_tp/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(xo_reclaim_begin)
{
	__u32 tid = bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();

	bpf_map_update_elem(&reclaim_start, &tid, &now, BPF_ANY);
	return 0;
}

SEC("raw_tp/mm_vmscan_direct_reclaim_end")
int BPF_PROG(xo_reclaim_end, unsigned long nr_reclaimed)
{
	struct mem_stats *s = &stats[xt_cpu()];
	__u32 tid = bpf_get_current_pid_tgid();
	__u64 *ts, now = bpf_ktime_get_ns();

	ts = bpf_map_lookup_elem(&reclaim_start, &tid);
	if (!ts)
		return 0;
	XT_ADD(s->direct_reclaims, 1);
	XT_ADD(s->direct_reclaimed_pages, nr_reclaimed);
	if (now > *ts)
		xt_hist_add(&s->direct_reclaim_ns, now - *ts);
	bpf_map_delete_elem(&reclaim_start, &tid);
	return 0;
}

SEC("raw_tp/mm_migrate_pages")
int BPF_PROG(xo_migrate_pages, unsigned long succeeded, unsigned long failed)
{
	struct mem_stats *s = &stats[xt_cpu()];

	XT_ADD(s->migrated_pages, succeeded);
	XT_ADD(s->migrate_failed_pages, failed);
	return 0;
}
