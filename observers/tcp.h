/* SPDX-License-Identifier: MIT */
/* tcp family: types shared by tcp.bpf.c and tcp.c. */
#ifndef XOBSERVE_TCP_H
#define XOBSERVE_TCP_H

struct tcp_stats {
	__u64 retransmits;
	__u64 resets_sent;
	__u64 state_changes;
	__u64 established; /* transitions into ESTABLISHED */
	__u64 closed;	   /* transitions into CLOSE */
	__u64 rtt_samples;
	struct xt_hist srtt_us; /* smoothed RTT at each tcp_probe, in microseconds */
} XT_PERCPU;

#endif
