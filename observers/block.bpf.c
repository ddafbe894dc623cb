// SPDX-License-Identifier: GPL-2.0
/* block family: I/O latency, ops, bytes, merges, plug flush depth. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "xtune/observe_bpf.h"
#include "block.h"

char LICENSE[] SEC("license") = "GPL";

/* Only this device (major, minor) when target_major is set. */
const volatile int target_major = -1;
const volatile int target_minor = -1;

#define REQ_OP_MASK_NR 0xff /* (1 << REQ_OP_BITS) - 1: a macro, not in vmlinux.h */

struct block_stats stats[XT_MAX_CPUS];

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct request * */
	__type(value, __u64);
} issued_at SEC(".maps");

static __always_inline bool wanted_disk(struct gendisk *disk)
{
	if (target_major < 0)
		return true;
	return disk && BPF_CORE_READ(disk, major) == target_major &&
	       BPF_CORE_READ(disk, first_minor) == target_minor;
}

static __always_inline bool wanted_rq(struct request *rq)
{
	return wanted_disk(BPF_CORE_READ(rq, q, disk));
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(xo_block_issue, struct request *rq)
{
	__u64 key = (__u64)rq, now = bpf_ktime_get_ns();

	if (wanted_rq(rq))
		bpf_map_update_elem(&issued_at, &key, &now, BPF_ANY);
	return 0;
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(xo_block_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	struct block_stats *s = &stats[xt_cpu()];
	__u64 key = (__u64)rq, *ts;
	__u32 op;

	if (!wanted_rq(rq))
		return 0;
	op = BPF_CORE_READ(rq, cmd_flags) & REQ_OP_MASK_NR;
	XT_ADD(s->ops, 1);
	XT_ADD(s->bytes, nr_bytes);
	if (op == REQ_OP_READ)
		XT_ADD(s->read_ops, 1);
	else if (op == REQ_OP_WRITE)
		XT_ADD(s->write_ops, 1);
	if (error)
		XT_ADD(s->errors, 1);
	ts = bpf_map_lookup_elem(&issued_at, &key);
	if (ts) {
		__u64 now = bpf_ktime_get_ns();

		if (now > *ts)
			xt_hist_add(&s->latency_ns, now - *ts);
		bpf_map_delete_elem(&issued_at, &key);
	}
	return 0;
}

static __always_inline void bio_merged(struct bio *bio)
{
	if (wanted_disk(BPF_CORE_READ(bio, bi_bdev, bd_disk)))
		XT_ADD(stats[xt_cpu()].merges, 1);
}

SEC("raw_tp/block_bio_backmerge")
int BPF_PROG(xo_block_backmrg, struct bio *bio)
{
	bio_merged(bio);
	return 0;
}

SEC("raw_tp/block_bio_frontmerge")
int BPF_PROG(xo_block_frontmrg, struct bio *bio)
{
	bio_merged(bio);
	return 0;
}

SEC("raw_tp/block_rq_merge")
int BPF_PROG(xo_block_rq_merge, struct request *rq)
{
	if (wanted_rq(rq))
		XT_ADD(stats[xt_cpu()].merges, 1);
	return 0;
}

SEC("raw_tp/block_unplug")
int BPF_PROG(xo_block_unplug, struct request_queue *q, unsigned int depth, bool explicit)
{
	struct block_stats *s = &stats[xt_cpu()];

	if (!wanted_disk(BPF_CORE_READ(q, disk)))
		return 0;
	XT_ADD(s->unplugs, 1);
	XT_ADD(s->unplug_requests, depth);
	return 0;
}
