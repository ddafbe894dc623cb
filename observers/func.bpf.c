// SPDX-License-Identifier: GPL-2.0
/* func family: calls, concurrency and latency of user functions (uprobe + uretprobe). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "xtune/observe_bpf.h"
#include "func.h"

char LICENSE[] SEC("license") = "GPL";

struct func_percpu stats[XT_MAX_CPUS];

struct inside {
	__u64 entry_ns; /* of the outermost call */
	__u64 depth;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* thread id << 8 | function slot (the attach cookie) */
	__type(value, struct inside);
} threads SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(xo_func_entry)
{
	__u64 slot = bpf_get_attach_cookie(ctx) & (XT_FUNC_SLOTS - 1);
	__u64 key = ((__u64)(__u32)bpf_get_current_pid_tgid() << 8) | slot,
	      now = bpf_ktime_get_ns();
	struct func_stats *s = &stats[xt_cpu()].f[slot];
	struct inside *in, fresh = {.entry_ns = now, .depth = 1};

	XT_ADD(s->calls, 1);
	in = bpf_map_lookup_elem(&threads, &key);
	if (in && in->depth) {
		in->depth++;
		return 0;
	}
	bpf_map_update_elem(&threads, &key, &fresh, BPF_ANY);
	XT_ADD(s->outer_entries, 1);
	XT_ADD(s->entry_ns_sum, now);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(xo_func_exit)
{
	__u64 slot = bpf_get_attach_cookie(ctx) & (XT_FUNC_SLOTS - 1);
	__u64 key = ((__u64)(__u32)bpf_get_current_pid_tgid() << 8) | slot,
	      now = bpf_ktime_get_ns();
	struct func_stats *s = &stats[xt_cpu()].f[slot];
	struct inside *in;

	in = bpf_map_lookup_elem(&threads, &key);
	if (!in || !in->depth)
		return 0;
	if (--in->depth)
		return 0;
	XT_ADD(s->outer_exits, 1);
	XT_ADD(s->exit_ns_sum, now);
	if (now > in->entry_ns)
		xt_hist_add(&s->latency_ns, now - in->entry_ns);
	bpf_map_delete_elem(&threads, &key);
	return 0;
}
