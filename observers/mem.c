// SPDX-License-Identifier: MIT
/* mem family, user side. */
#include <errno.h>

#include "observer.h"
#include "mem.h"
#include "mem.skel.h"

static struct mem_bpf *skel;
static struct mem_stats prev;
static int id_calls, id_scan, id_freed, id_reclaims, id_pages, id_migr, id_migr_fail, id_lat;

static void mem_collect(uint64_t window_ns)
{
	struct mem_stats d;

	(void)window_ns;
	xt_percpu_delta(skel->bss->stats, &prev, &d, sizeof(d));
	xt_emit(id_calls, d.shrink_calls);
	xt_emit(id_scan, d.shrink_to_scan);
	xt_emit(id_freed, d.shrink_freed);
	xt_emit(id_reclaims, d.direct_reclaims);
	xt_emit(id_pages, d.direct_reclaimed_pages);
	xt_emit(id_migr, d.migrated_pages);
	xt_emit(id_migr_fail, d.migrate_failed_pages);
	xt_emit_quantiles(id_lat, d.direct_reclaim_ns.slots, XT_HIST_SLOTS, 1e-3);
}

static int mem_start(const struct xt_options *opt)
{
	const char *shrink = "raw_tp:mm_shrink_slab_start,mm_shrink_slab_end";
	const char *reclaim = "raw_tp:mm_vmscan_direct_reclaim_begin,end";
	int err;

	(void)opt;
	skel = mem_bpf__open_and_load();
	if (!skel)
		return -errno;
	err = mem_bpf__attach(skel);
	if (err)
		return err;
	id_calls = xt_signal_add("mem.shrink_slab_calls", "calls", "counter", shrink);
	id_scan = xt_signal_add("mem.shrink_slab_to_scan", "objects", "counter", shrink);
	id_freed = xt_signal_add("mem.shrink_slab_freed", "objects", "counter", shrink);
	id_reclaims = xt_signal_add("mem.direct_reclaims", "reclaims", "counter", reclaim);
	id_pages = xt_signal_add("mem.direct_reclaimed_pages", "pages", "counter", reclaim);
	id_migr =
		xt_signal_add("mem.migrated_pages", "pages", "counter", "raw_tp:mm_migrate_pages");
	id_migr_fail = xt_signal_add("mem.migrate_failed_pages", "pages", "counter",
				     "raw_tp:mm_migrate_pages");
	id_lat = xt_quantiles_add("mem.direct_reclaim_latency", "us", reclaim);
	mem_collect(0);
	return 0;
}

static void mem_stop(void)
{
	mem_bpf__destroy(skel);
	skel = NULL;
}

const struct xt_family mem_family = {
	.name = "mem",
	.summary = "slab shrink calls and objects, direct reclaim latency p50/p99, page migrations",
	.start = mem_start,
	.collect = mem_collect,
	.stop = mem_stop,
};
