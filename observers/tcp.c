// SPDX-License-Identifier: MIT
/* tcp family, user side. */
#include <errno.h>

#include "observer.h"
#include "tcp.h"
#include "tcp.skel.h"

static struct tcp_bpf *skel;
static struct tcp_stats prev;
static int id_retrans, id_resets, id_states, id_est, id_closed, id_samples, id_rtt;

static void tcp_collect(uint64_t window_ns)
{
	struct tcp_stats d;

	(void)window_ns;
	xt_percpu_delta(skel->bss->stats, &prev, &d, sizeof(d));
	xt_emit(id_retrans, d.retransmits);
	xt_emit(id_resets, d.resets_sent);
	xt_emit(id_states, d.state_changes);
	xt_emit(id_est, d.established);
	xt_emit(id_closed, d.closed);
	xt_emit(id_samples, d.rtt_samples);
	xt_emit_quantiles(id_rtt, d.srtt_us.slots, XT_HIST_SLOTS, 1);
}

static int tcp_start(const struct xt_options *opt)
{
	const char *state = "raw_tp:inet_sock_set_state";
	int err;

	(void)opt;
	skel = tcp_bpf__open_and_load();
	if (!skel)
		return -errno;
	err = tcp_bpf__attach(skel);
	if (err)
		return err;
	id_retrans = xt_signal_add("tcp.retransmits", "segments", "counter",
				   "raw_tp:tcp_retransmit_skb");
	id_resets = xt_signal_add("tcp.resets_sent", "resets", "counter", "raw_tp:tcp_send_reset");
	id_states = xt_signal_add("tcp.state_changes", "changes", "counter", state);
	id_est = xt_signal_add("tcp.established", "connections", "counter", state);
	id_closed = xt_signal_add("tcp.closed", "connections", "counter", state);
	id_samples = xt_signal_add("tcp.rtt_samples", "samples", "counter", "raw_tp:tcp_probe");
	id_rtt = xt_quantiles_add("tcp.srtt", "us", "raw_tp:tcp_probe");
	tcp_collect(0);
	return 0;
}

static void tcp_stop(void)
{
	tcp_bpf__destroy(skel);
	skel = NULL;
}

const struct xt_family tcp_family = {
	.name = "tcp",
	.summary = "retransmits, resets, smoothed RTT p50/p99, state changes",
	.start = tcp_start,
	.collect = tcp_collect,
	.stop = tcp_stop,
};
