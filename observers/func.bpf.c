// SPDX-License-Identifier: GPL-2.0
/* func family: calls, concurrency and latency of user functions (uprobe + uretprobe). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "xtune/observe_bpf.h"
#include "func.h"

char LICENSE[] SEC("license") = "GPL";

const volatile char target_comm[16] = {}; /* "": any command (--pid filters at attach) */

/* Gauged arguments: register number + 1 (0: none) and whether to read only 32 bits. */
const volatile __u8 arg_reg[XT_FUNC_SLOTS][XT_FUNC_ARGS] = {};
const volatile __u8 arg_32bit[XT_FUNC_SLOTS][XT_FUNC_ARGS] = {};

struct func_percpu stats[XT_FUNC_STRIPES];
struct func_max maxes[XT_FUNC_STRIPES];

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

static __always_inline __s64 arg_value(struct pt_regs *ctx, __u32 reg, bool bits32)
{
	__u64 r[8] = {PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
		      PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx)}; /* 8: a mask bounds the index */
	__u64 v;

	/* Loads at fixed offsets first: the verifier refuses a ctx pointer moved by a variable. */
	asm volatile("" : : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]));
	v = r[(reg - 1) & 7];
	/* An int leaves the register's upper half undefined: sign-extend the lower one. */
	return bits32 ? (__s64)(__s32)v : (__s64)v;
}

/* Lock-free max; a few retries suffice as only CPUs sharing a stripe contend. */
static __always_inline void max_update(__s64 *m, __s64 v)
{
	__s64 cur;
	int i;

	for (i = 0; i < 8; i++) {
		cur = *(volatile __s64 *)m;
		if (v <= cur || __sync_val_compare_and_swap(m, cur, v) == cur)
			return;
	}
}

static __always_inline void gauge_args(struct pt_regs *ctx, __u32 stripe, __u32 slot,
				       struct func_stats *s)
{
	__u32 k, reg;
	__s64 v;

	for (k = 0; k < XT_FUNC_ARGS; k++) {
		reg = arg_reg[slot][k];
		if (!reg)
			break;
		v = arg_value(ctx, reg, arg_32bit[slot][k]);
		XT_ADD(s->arg_sum[k], (__u64)v);
		max_update(&maxes[stripe].m[slot][k], v);
	}
}

SEC("uprobe")
int BPF_KPROBE(xo_func_entry)
{
	__u64 slot = bpf_get_attach_cookie(ctx) & (XT_FUNC_SLOTS - 1);
	__u64 key = ((__u64)(__u32)bpf_get_current_pid_tgid() << 8) | slot,
	      now = bpf_ktime_get_ns();
	__u32 stripe = xt_cpu() & (XT_FUNC_STRIPES - 1);
	struct func_stats *s = &stats[stripe].f[slot];
	struct inside *in, fresh = {.entry_ns = now, .depth = 1};
	char comm[16];

	if (target_comm[0]) {
		bpf_get_current_comm(comm, sizeof(comm));
		if (!xt_comm_equal(comm, target_comm))
			return 0;
	}
	gauge_args(ctx, stripe, slot, s);
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
	struct func_stats *s = &stats[xt_cpu() & (XT_FUNC_STRIPES - 1)].f[slot];
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
