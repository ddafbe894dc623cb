// SPDX-License-Identifier: GPL-2.0
/* softirq family: time and count per vector. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "xtune/observe_bpf.h"
#include "softirq.h"

char LICENSE[] SEC("license") = "GPL";

struct softirq_stats stats[XT_MAX_CPUS];

SEC("raw_tp/softirq_entry")
int BPF_PROG(xo_softirq_entry, unsigned int vec)
{
	stats[xt_cpu()].entry_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/softirq_exit")
int BPF_PROG(xo_softirq_exit, unsigned int vec)
{
	struct softirq_stats *s = &stats[xt_cpu()];
	__u64 now = bpf_ktime_get_ns();

	if (vec >= XT_NR_SOFTIRQS)
		return 0;
	s->count[vec]++;
	if (s->entry_ns && now > s->entry_ns)
		s->time_ns[vec] += now - s->entry_ns;
	return 0;
}
