// SPDX-License-Identifier: MIT
/* func family, user side: --func BINARY:FUNCTION, one slot per function. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "observer.h"
#include "func.h"
#include "func.skel.h"

_Static_assert(XT_FUNC_SLOTS == XT_MAX_FUNCS, "one BPF slot per --func");

static struct func_bpf *skel;
static struct bpf_link *links[2 * XT_MAX_FUNCS];
static int nr_links, nr_funcs;
static struct func_percpu prev;
static uint64_t inside_prev[XT_MAX_FUNCS];
static int id_calls[XT_MAX_FUNCS], id_rate[XT_MAX_FUNCS], id_conc[XT_MAX_FUNCS],
	id_lat[XT_MAX_FUNCS];

/* A(t) of func.h from the cumulative sums (modulo 2^64). */
static uint64_t inside_ns(const struct func_stats *cum, uint64_t t)
{
	return cum->exit_ns_sum - cum->entry_ns_sum + (cum->outer_entries - cum->outer_exits) * t;
}

static void func_collect(uint64_t window_ns)
{
	struct func_percpu d;
	uint64_t now = xt_now_ns(), a;
	int i;

	xt_percpu_delta(skel->bss->stats, &prev, &d, sizeof(d));
	for (i = 0; i < nr_funcs; i++) {
		a = inside_ns(&prev.f[i], now);
		xt_emit(id_calls[i], d.f[i].calls);
		xt_emit(id_rate[i], window_ns ? d.f[i].calls * 1e9 / window_ns : 0);
		xt_emit(id_conc[i],
			window_ns ? (double)(int64_t)(a - inside_prev[i]) / window_ns : 0);
		xt_emit_quantiles(id_lat[i], d.f[i].latency_ns.slots, XT_HIST_SLOTS, 1e-3);
		inside_prev[i] = a;
	}
}

static int attach(int slot, const char *binary, const char *function, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = function, .retprobe = ret,
		    .bpf_cookie = slot);
	struct bpf_program *prog = ret ? skel->progs.xo_func_exit : skel->progs.xo_func_entry;
	struct bpf_link *link;

	link = bpf_program__attach_uprobe_opts(prog, -1, binary, 0, &uo);
	if (!link) {
		fprintf(stderr, "xobserve: func: cannot uprobe %s in %s: %s\n", function, binary,
			strerror(errno));
		return -errno;
	}
	links[nr_links++] = link;
	return 0;
}

static int func_start(const struct xt_options *opt)
{
	char binary[4096], name[160];
	const char *fn, *src = "uprobe+uretprobe";
	int i, err;

	if (!opt->nr_funcs) {
		fprintf(stderr, "xobserve: func: needs --func BINARY:FUNCTION\n");
		return -EINVAL;
	}
	skel = func_bpf__open_and_load();
	if (!skel)
		return -errno;
	for (i = 0; i < opt->nr_funcs; i++) {
		fn = strrchr(opt->funcs[i], ':');
		snprintf(binary, sizeof(binary), "%.*s", (int)(fn - opt->funcs[i]), opt->funcs[i]);
		fn++;
		if (access(binary, R_OK)) {
			fprintf(stderr, "xobserve: func: %s: %s\n", binary, strerror(errno));
			return -ENOENT;
		}
		err = attach(i, binary, fn, false) ?: attach(i, binary, fn, true);
		if (err)
			return err;
	}
	/* Signals once every function is attached: a failure leaves no dead catalog entries. */
	for (i = 0; i < opt->nr_funcs; i++) {
		fn = strrchr(opt->funcs[i], ':') + 1;
		snprintf(name, sizeof(name), "func.%s.calls", fn);
		id_calls[i] = xt_signal_add(name, "calls", "counter", src);
		snprintf(name, sizeof(name), "func.%s.rate", fn);
		id_rate[i] = xt_signal_add(name, "calls/s", "gauge", src);
		snprintf(name, sizeof(name), "func.%s.concurrency", fn);
		id_conc[i] = xt_signal_add(name, "threads", "gauge", src);
		snprintf(name, sizeof(name), "func.%s.latency", fn);
		id_lat[i] = xt_quantiles_add(name, "us", src);
	}
	nr_funcs = opt->nr_funcs;
	func_collect(0);
	return 0;
}

static void func_stop(void)
{
	while (nr_links)
		bpf_link__destroy(links[--nr_links]);
	func_bpf__destroy(skel);
	skel = NULL;
	nr_funcs = 0;
}

const struct xt_family func_family = {
	.name = "func",
	.summary =
		"calls, concurrency and latency p50/p99 of user functions (--func BINARY:FUNCTION)",
	.start = func_start,
	.collect = func_collect,
	.stop = func_stop,
};
