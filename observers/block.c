// SPDX-License-Identifier: MIT
/* block family, user side. */
#include <errno.h>
#include <stdio.h>

#include "observer.h"
#include "block.h"
#include "block.skel.h"

static struct block_bpf *skel;
static struct block_stats prev;
static int id_ops, id_read, id_write, id_bytes, id_errors, id_merges, id_unplugs, id_depth, id_lat;

static void block_collect(uint64_t window_ns)
{
	struct block_stats d;

	(void)window_ns;
	xt_percpu_delta(skel->bss->stats, &prev, &d, sizeof(d));
	xt_emit(id_ops, d.ops);
	xt_emit(id_read, d.read_ops);
	xt_emit(id_write, d.write_ops);
	xt_emit(id_bytes, d.bytes);
	xt_emit(id_errors, d.errors);
	xt_emit(id_merges, d.merges);
	xt_emit(id_unplugs, d.unplugs);
	if (d.unplugs)
		xt_emit(id_depth, (double)d.unplug_requests / d.unplugs);
	else
		xt_emit_empty(id_depth);
	xt_emit_quantiles(id_lat, d.latency_ns.slots, XT_HIST_SLOTS, 1e-3);
}

static int block_start(const struct xt_options *opt)
{
	const char *src = "raw_tp:block_rq_issue,block_rq_complete";
	int err;

	skel = block_bpf__open();
	if (!skel)
		return -errno;
	if (opt->block_major >= 0) {
		skel->rodata->target_major = opt->block_major;
		skel->rodata->target_minor = opt->block_minor;
	}
	err = block_bpf__load(skel) ?: block_bpf__attach(skel);
	if (err)
		return err;
	id_ops = xt_signal_add("block.ops", "ops", "counter", src);
	id_read = xt_signal_add("block.read_ops", "ops", "counter", src);
	id_write = xt_signal_add("block.write_ops", "ops", "counter", src);
	id_bytes = xt_signal_add("block.bytes", "bytes", "counter", src);
	id_errors = xt_signal_add("block.errors", "ops", "counter", src);
	id_merges = xt_signal_add("block.merges", "merges", "counter",
				  "raw_tp:block_bio_backmerge,block_bio_frontmerge,block_rq_merge");
	id_unplugs = xt_signal_add("block.unplugs", "unplugs", "counter", "raw_tp:block_unplug");
	id_depth = xt_signal_add("block.unplug_depth", "requests", "gauge", "raw_tp:block_unplug");
	id_lat = xt_quantiles_add("block.latency", "us", src);
	block_collect(0);
	return 0;
}

static void block_stop(void)
{
	block_bpf__destroy(skel);
	skel = NULL;
}

const struct xt_family block_family = {
	.name = "block",
	.summary = "I/O latency p50/p99, ops, bytes, merges, plug flush depth",
	.start = block_start,
	.collect = block_collect,
	.stop = block_stop,
};
