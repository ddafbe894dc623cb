/* SPDX-License-Identifier: MIT */
/*
 * Types shared by the BPF side and the user side of every xobserve family.
 *
 * Each family keeps cumulative counters and log-linear histograms in a per-CPU slot of its .bss
 * (indexed by the CPU the program runs on, one cache line apart). The daemon reads the memory-
 * mapped .bss once per window and takes the difference with the previous read: an event that
 * lands while the window closes is counted in this window or the next, never lost, and reading
 * costs no system call. Everything in a stats struct is a __u64 so that user space can sum
 * and subtract them generically.
 *
 * The includer provides __u32/__u64 (vmlinux.h on the BPF side, <linux/types.h> in user space).
 */
#ifndef XTUNE_OBSERVE_BPF_H
#define XTUNE_OBSERVE_BPF_H

#define XT_MAX_CPUS 256

/*
 * Log-linear (HDR-style) histograms. Values below 16 have a bucket each; every range
 * [2^k, 2^(k+1)) above is split into 16 linear sub-buckets of width 2^(k-4), so a bucket's
 * midpoint is within 1/32 (3.1 %) of any value in it. Values from 2^XT_HIST_MAX_LOG2 on count
 * in the last bucket.
 */
#define XT_HIST_SUB_BITS 4
#define XT_HIST_SUB	 (1 << XT_HIST_SUB_BITS)
#define XT_HIST_MAX_LOG2 36 /* 2^36 ns = 68.7 s */
#define XT_HIST_SLOTS	 ((XT_HIST_MAX_LOG2 - XT_HIST_SUB_BITS + 1) * XT_HIST_SUB)

struct xt_hist {
	__u64 slots[XT_HIST_SLOTS];
};

#define XT_PERCPU __attribute__((aligned(64)))

/* floor(log2(v)) without loops, for the verifier (0 for v = 0). */
static inline __u32 xt_log2(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xffffffffULL) << 5;
	v >>= shift;
	r |= shift;
	shift = (v > 0xffff) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xff) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xf) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

/*
 * The bucket of v: v itself below 16; else the range's number (highest set bit - 3) in the
 * high bits and the 4 bits after the highest set bit as the sub-bucket.
 */
static inline __u32 xt_hist_index(__u64 v)
{
	__u32 msb, idx;

	if (v < XT_HIST_SUB)
		return v;
	msb = xt_log2(v);
	if (msb >= XT_HIST_MAX_LOG2)
		return XT_HIST_SLOTS - 1;
	idx = ((msb - XT_HIST_SUB_BITS + 1) << XT_HIST_SUB_BITS) |
	      ((v >> (msb - XT_HIST_SUB_BITS)) & (XT_HIST_SUB - 1));
	return idx < XT_HIST_SLOTS ? idx : XT_HIST_SLOTS - 1;
}

#ifdef __BPF__
static __always_inline void xt_hist_add(struct xt_hist *h, __u64 v)
{
	__u32 slot = xt_hist_index(v);

	/*
	 * Always below XT_HIST_SLOTS; the barrier keeps clang from splitting the index into parts
	 * the verifier cannot bound, and the check (never taken) is for the verifier.
	 */
	asm volatile("" : "+r"(slot));
	if (slot >= XT_HIST_SLOTS)
		return;
	__sync_fetch_and_add(&h->slots[slot], 1);
}

static __always_inline __u32 xt_cpu(void)
{
	return bpf_get_smp_processor_id() & (XT_MAX_CPUS - 1);
}

/* A task's comm against a family's const volatile target (both 16 bytes, NUL-terminated). */
static __always_inline bool xt_comm_equal(const char *comm, const volatile char *target)
{
	int i;

	for (i = 0; i < 16; i++) {
		if (comm[i] != target[i])
			return false;
		if (!comm[i])
			break;
	}
	return true;
}

#define XT_ADD(field, v) __sync_fetch_and_add(&(field), (v))
#endif /* __BPF__ */

#endif /* XTUNE_OBSERVE_BPF_H */
