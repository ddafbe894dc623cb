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

/* A signal's source: the tracepoint, and the filters that scope it (say so in the catalog). */
static const char *source(const struct xt_options *opt, const char *tp)
{
	static char buf[4][128];
	static int next;
	char *s = buf[next++ % 4];
	int n = snprintf(s, sizeof(buf[0]), "raw_tp:%s", tp);

	if (opt->netns_ino)
		n += snprintf(s + n, sizeof(buf[0]) - n, " netns=%u", opt->netns_ino);
	if (opt->port)
		snprintf(s + n, sizeof(buf[0]) - n, " port=%d", opt->port);
	return s;
}

static int tcp_start(const struct xt_options *opt)
{
	const char *state = source(opt, "inet_sock_set_state");
	int err;

	skel = tcp_bpf__open();
	if (!skel)
		return -errno;
	skel->rodata->filter_netns = opt->netns_ino;
	skel->rodata->filter_port = (uint16_t)opt->port;
	err = tcp_bpf__load(skel) ?: tcp_bpf__attach(skel);
	if (err)
		return err;
	id_retrans = xt_signal_add("tcp.retransmits", "segments", "counter",
				   source(opt, "tcp_retransmit_skb"));
	id_resets = xt_signal_add("tcp.resets_sent", "resets", "counter",
				  source(opt, "tcp_send_reset"));
	id_states = xt_signal_add("tcp.state_changes", "changes", "counter", state);
	id_est = xt_signal_add("tcp.established", "connections", "counter", state);
	id_closed = xt_signal_add("tcp.closed", "connections", "counter", state);
	id_samples =
		xt_signal_add("tcp.rtt_samples", "samples", "counter", source(opt, "tcp_probe"));
	id_rtt = xt_quantiles_add("tcp.srtt", "us", source(opt, "tcp_probe"));
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
