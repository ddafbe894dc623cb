// SPDX-License-Identifier: MIT
/*
 * func family, user side: one slot per --func (func_spec.c reads it), with the window mean and
 * max of each named integer argument.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "observer.h"
#include "func.h"
#include "func.skel.h"

_Static_assert(XT_FUNC_SLOTS == XT_MAX_FUNCS, "one BPF slot per --func");
_Static_assert(XT_FUNC_ARGS == XT_MAX_FUNC_ARGS, "one BPF gauge per argN=NAME");

static struct func_bpf *skel;
static struct bpf_link *links[2 * XT_MAX_FUNCS];
static int nr_links, nr_funcs, nr_stripes, target_pid;
static struct xt_func_spec specs[XT_MAX_FUNCS];
static struct func_percpu prev;
static uint64_t inside_prev[XT_MAX_FUNCS];
static int id_calls[XT_MAX_FUNCS], id_rate[XT_MAX_FUNCS], id_conc[XT_MAX_FUNCS],
	id_lat[XT_MAX_FUNCS], id_mean[XT_MAX_FUNCS][XT_FUNC_ARGS],
	id_max[XT_MAX_FUNCS][XT_FUNC_ARGS];

/* A(t) of func.h from the cumulative sums (modulo 2^64). */
static uint64_t inside_ns(const struct func_stats *cum, uint64_t t)
{
	return cum->exit_ns_sum - cum->entry_ns_sum + (cum->outer_entries - cum->outer_exits) * t;
}

/* The largest value since the last call, over the stripes, resetting them. */
static int64_t take_max(int f, int k)
{
	int64_t max = XT_FUNC_NO_MAX, v;
	int s;

	for (s = 0; s < nr_stripes; s++) {
		v = __atomic_exchange_n(&skel->bss->maxes[s].m[f][k], XT_FUNC_NO_MAX,
					__ATOMIC_SEQ_CST);
		if (v > max)
			max = v;
	}
	return max;
}

static void func_collect(uint64_t window_ns)
{
	struct func_percpu d;
	uint64_t now = xt_now_ns(), a;
	int64_t max;
	int i, k;

	xt_striped_delta(skel->bss->stats, nr_stripes, &prev, &d, sizeof(d));
	for (i = 0; i < nr_funcs; i++) {
		a = inside_ns(&prev.f[i], now);
		xt_emit(id_calls[i], d.f[i].calls);
		xt_emit(id_rate[i], window_ns ? d.f[i].calls * 1e9 / window_ns : 0);
		xt_emit(id_conc[i],
			window_ns ? (double)(int64_t)(a - inside_prev[i]) / window_ns : 0);
		xt_emit_quantiles(id_lat[i], d.f[i].latency_ns.slots, XT_HIST_SLOTS, 1e-3);
		inside_prev[i] = a;
		for (k = 0; k < specs[i].nargs; k++) {
			if (d.f[i].calls)
				xt_emit(id_mean[i][k],
					(double)(int64_t)d.f[i].arg_sum[k] / d.f[i].calls);
			else
				xt_emit_empty(id_mean[i][k]);
			max = take_max(i, k);
			if (max != XT_FUNC_NO_MAX)
				xt_emit(id_max[i][k], max);
			else
				xt_emit_empty(id_max[i][k]);
		}
	}
}

static int attach(int slot, const char *binary, const char *function, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = function, .retprobe = ret,
		    .bpf_cookie = slot);
	struct bpf_program *prog = ret ? skel->progs.xo_func_exit : skel->progs.xo_func_entry;
	struct bpf_link *link;

	/* With --pid the kernel only traps in that process (uprobes filter by mm: every thread). */
	link = bpf_program__attach_uprobe_opts(prog, target_pid ?: -1, binary, 0, &uo);
	if (!link) {
		fprintf(stderr, "xobserve: func: cannot uprobe %s in %s: %s\n", function, binary,
			strerror(errno));
		return -errno;
	}
	links[nr_links++] = link;
	return 0;
}

static void add_signals(int i, const struct xt_func_spec *spec)
{
	const char *fn = spec->function, *src = "uprobe+uretprobe";
	char name[256];
	int k;

	snprintf(name, sizeof(name), "func.%s.calls", fn);
	id_calls[i] = xt_signal_add(name, "calls", "counter", src);
	snprintf(name, sizeof(name), "func.%s.rate", fn);
	id_rate[i] = xt_signal_add(name, "calls/s", "gauge", src);
	snprintf(name, sizeof(name), "func.%s.concurrency", fn);
	id_conc[i] = xt_signal_add(name, "threads", "gauge", src);
	snprintf(name, sizeof(name), "func.%s.latency", fn);
	id_lat[i] = xt_quantiles_add(name, "us", src);
	for (k = 0; k < spec->nargs; k++) {
		snprintf(name, sizeof(name), "func.%s.%s.mean", fn, spec->args[k].name);
		id_mean[i][k] = xt_signal_add(name, "value", "gauge", "uprobe argument");
		snprintf(name, sizeof(name), "func.%s.%s.max", fn, spec->args[k].name);
		id_max[i][k] = xt_signal_add(name, "value", "gauge", "uprobe argument");
	}
}

static int func_start(const struct xt_options *opt)
{
	char err[256];
	int i, k, s, rc;

	if (!opt->nr_funcs) {
		fprintf(stderr, "xobserve: func: needs --func BINARY:FUNCTION\n");
		return -EINVAL;
	}
	for (i = 0; i < opt->nr_funcs; i++) {
		if (xt_func_spec_parse(opt->funcs[i], &specs[i], err, sizeof(err))) {
			fprintf(stderr, "xobserve: func: %s\n", err);
			return -EINVAL;
		}
		if (access(specs[i].binary, R_OK)) {
			fprintf(stderr, "xobserve: func: %s: %s\n", specs[i].binary,
				strerror(errno));
			return -ENOENT;
		}
	}
	skel = func_bpf__open();
	if (!skel)
		return -errno;
	if (opt->target_comm)
		strncpy((char *)skel->rodata->target_comm, opt->target_comm,
			sizeof(skel->rodata->target_comm) - 1);
	for (i = 0; i < opt->nr_funcs; i++)
		for (k = 0; k < specs[i].nargs; k++) {
			skel->rodata->arg_reg[i][k] = specs[i].args[k].reg + 1;
			skel->rodata->arg_32bit[i][k] = specs[i].args[k].bits32;
		}
	rc = func_bpf__load(skel);
	if (rc)
		return rc;
	target_pid = opt->target_pid;
	nr_stripes = xt_nr_cpus() < XT_FUNC_STRIPES ? xt_nr_cpus() : XT_FUNC_STRIPES;
	for (s = 0; s < XT_FUNC_STRIPES; s++)
		for (i = 0; i < XT_FUNC_SLOTS; i++)
			for (k = 0; k < XT_FUNC_ARGS; k++)
				skel->bss->maxes[s].m[i][k] = XT_FUNC_NO_MAX;
	for (i = 0; i < opt->nr_funcs; i++) {
		rc = attach(i, specs[i].binary, specs[i].function, false)
			     ?: attach(i, specs[i].binary, specs[i].function, true);
		if (rc)
			return rc;
	}
	/* Signals once every function is attached: a failure leaves no dead catalog entries. */
	for (i = 0; i < opt->nr_funcs; i++)
		add_signals(i, &specs[i]);
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
	.summary = "calls, concurrency, latency p50/p99 and argument mean/max of user functions "
		   "(--func BINARY:FUNCTION[:argN=NAME])",
	.start = func_start,
	.collect = func_collect,
	.stop = func_stop,
};
