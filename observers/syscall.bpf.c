// SPDX-License-Identifier: GPL-2.0
/* syscall family: system-call rate and latency of a target process (or command, or everyone). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "xtune/observe_bpf.h"
#include "syscall.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 target_tgid = 0;	  /* 0: any process */
const volatile char target_comm[16] = {}; /* "": any command */
const volatile __u32 self_tgid = 0;	  /* xobserve itself is never counted */

struct syscall_stats stats[XT_MAX_CPUS];

/* When the current system call of each thread began (task storage: no hash, no lock). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} entered_at SEC(".maps");

static __always_inline bool wanted(__u32 tgid)
{
	char comm[16];

	if (tgid == self_tgid || (target_tgid && tgid != target_tgid))
		return false;
	if (!target_comm[0])
		return true;
	bpf_get_current_comm(comm, sizeof(comm));
	return xt_comm_equal(comm, target_comm);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(xo_sys_enter, struct pt_regs *regs, long id)
{
	__u64 *ts;

	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	ts = bpf_task_storage_get(&entered_at, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (ts)
		*ts = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/sys_exit")
int BPF_PROG(xo_sys_exit, struct pt_regs *regs, long ret)
{
	struct syscall_stats *s;
	__u64 *ts, now;

	ts = bpf_task_storage_get(&entered_at, bpf_get_current_task_btf(), 0, 0);
	if (!ts || !*ts)
		return 0;
	now = bpf_ktime_get_ns();
	s = &stats[xt_cpu()];
	XT_ADD(s->calls, 1);
	if (ret < 0)
		XT_ADD(s->errors, 1);
	if (now > *ts)
		xt_hist_add(&s->latency_ns, now - *ts);
	*ts = 0;
	return 0;
}
