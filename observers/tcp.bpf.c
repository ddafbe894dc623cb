// SPDX-License-Identifier: GPL-2.0
/* tcp family: retransmits, resets, RTT samples and quantiles, state changes. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "xtune/observe_bpf.h"
#include "tcp.h"

char LICENSE[] SEC("license") = "GPL";

#define IPPROTO_TCP_NR	   6
#define TCP_ESTABLISHED_NR 1
#define TCP_CLOSE_NR	   7

const volatile __u32 filter_netns = 0; /* a network namespace's inode; 0: every namespace */
const volatile __u16 filter_port = 0;  /* a local or remote port; 0: every port */

struct tcp_stats stats[XT_MAX_CPUS];

/* Is this socket one the filters keep? A reset sent for no socket is kept only unfiltered. */
static __always_inline bool keep(const struct sock *sk)
{
	if (!filter_netns && !filter_port)
		return true;
	if (!sk)
		return false;
	if (filter_netns && BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum) != filter_netns)
		return false;
	return !filter_port || BPF_CORE_READ(sk, __sk_common.skc_num) == filter_port ||
	       bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport)) == filter_port;
}

SEC("raw_tp/tcp_retransmit_skb")
int BPF_PROG(xo_tcp_retrans, const struct sock *sk)
{
	if (!keep(sk))
		return 0;
	XT_ADD(stats[xt_cpu()].retransmits, 1);
	return 0;
}

SEC("raw_tp/tcp_send_reset")
int BPF_PROG(xo_tcp_reset, const struct sock *sk)
{
	if (!keep(sk))
		return 0;
	XT_ADD(stats[xt_cpu()].resets_sent, 1);
	return 0;
}

SEC("raw_tp/tcp_probe")
int BPF_PROG(xo_tcp_probe, struct sock *sk)
{
	struct tcp_stats *s = &stats[xt_cpu()];
	__u32 srtt = BPF_CORE_READ((struct tcp_sock *)sk, srtt_us) >> 3;

	if (!keep(sk))
		return 0;
	XT_ADD(s->rtt_samples, 1);
	xt_hist_add(&s->srtt_us, srtt);
	return 0;
}

SEC("raw_tp/inet_sock_set_state")
int BPF_PROG(xo_tcp_state, const struct sock *sk, const int oldstate, const int newstate)
{
	struct tcp_stats *s = &stats[xt_cpu()];

	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP_NR || !keep(sk))
		return 0;
	XT_ADD(s->state_changes, 1);
	if (newstate == TCP_ESTABLISHED_NR)
		XT_ADD(s->established, 1);
	else if (newstate == TCP_CLOSE_NR)
		XT_ADD(s->closed, 1);
	return 0;
}
