// SPDX-License-Identifier: MIT
/*
 * pmu family: hardware counters (cycles, instructions, LLC and dTLB misses) through
 * perf_event_open on every CPU when the host has a PMU; otherwise the catalog says
 * "pmu: unavailable" and only software events are published, never invented numbers.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>

#include "observer.h"

struct pmu_event {
	const char *name, *unit;
	uint32_t type;
	uint64_t config;
	bool hardware;
};

#define HW_CACHE(cache, op, result)                                                                \
	((PERF_COUNT_HW_CACHE_##cache) | (PERF_COUNT_HW_CACHE_OP_##op << 8) |                      \
	 (PERF_COUNT_HW_CACHE_RESULT_##result << 16))

static const struct pmu_event events[] = {
	{"pmu.cycles", "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, true},
	{"pmu.instructions", "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, true},
	{"pmu.llc_misses", "misses", PERF_TYPE_HW_CACHE, HW_CACHE(LL, READ, MISS), true},
	{"pmu.dtlb_misses", "misses", PERF_TYPE_HW_CACHE, HW_CACHE(DTLB, READ, MISS), true},
	{"pmu.context_switches", "switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES,
	 false},
	{"pmu.cpu_migrations", "migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS,
	 false},
	{"pmu.page_faults", "faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, false},
	{"pmu.major_faults", "faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ, false},
};

#define NR_EVENTS (sizeof(events) / sizeof(events[0]))

/*
 * Events are read as groups (hardware, software): one read() per group and CPU returns all of its
 * counters, and a read of another CPU's counters costs an IPI, so fewer reads matter at 1 kHz.
 */
struct pmu_group {
	int leader[XT_MAX_CPUS];
	size_t member[NR_EVENTS]; /* event index of each value, in read order */
	int nr;
};

static struct pmu_group groups[2]; /* 0: hardware, 1: software */
static int fds[NR_EVENTS][XT_MAX_CPUS];
static bool enabled[NR_EVENTS];
static uint64_t prev[NR_EVENTS];
static int ids[NR_EVENTS];

static int open_counter(const struct pmu_event *e, int cpu, int group_fd)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = e->type,
		.config = e->config,
		.read_format = PERF_FORMAT_GROUP,
	};

	return syscall(SYS_perf_event_open, &attr, -1, cpu, group_fd, PERF_FLAG_FD_CLOEXEC);
}

static void pmu_collect(uint64_t window_ns)
{
	uint64_t sum[NR_EVENTS] = {}, buf[1 + NR_EVENTS];
	struct pmu_group *g;
	int cpu, i;
	size_t e;

	(void)window_ns;
	for (g = groups; g < groups + 2; g++) {
		for (cpu = 0; g->nr && cpu < xt_nr_cpus(); cpu++) {
			if (read(g->leader[cpu], buf, sizeof(buf)) < (ssize_t)sizeof(uint64_t))
				continue;
			for (i = 0; i < g->nr && i < (int)buf[0]; i++)
				sum[g->member[i]] += buf[1 + i];
		}
	}
	for (e = 0; e < NR_EVENTS; e++) {
		if (!enabled[e])
			continue;
		xt_emit(ids[e], sum[e] - prev[e]);
		prev[e] = sum[e];
	}
}

static void pmu_stop(void)
{
	size_t e;
	int cpu;

	for (e = 0; e < NR_EVENTS; e++) {
		for (cpu = 0; cpu < XT_MAX_CPUS; cpu++) {
			if (enabled[e] && fds[e][cpu] >= 0)
				close(fds[e][cpu]);
			fds[e][cpu] = -1;
		}
		enabled[e] = false;
	}
	memset(groups, 0, sizeof(groups));
}

/* An event is used only if it opens on every CPU (in its group there). */
static int open_event(size_t e)
{
	struct pmu_group *g = &groups[events[e].hardware ? 0 : 1];
	int cpu, err;

	for (cpu = 0; cpu < xt_nr_cpus(); cpu++) {
		fds[e][cpu] = open_counter(&events[e], cpu, g->nr ? g->leader[cpu] : -1);
		if (fds[e][cpu] < 0) {
			err = -errno;
			while (cpu--)
				close(fds[e][cpu]);
			return err;
		}
	}
	for (cpu = 0; !g->nr && cpu < xt_nr_cpus(); cpu++)
		g->leader[cpu] = fds[e][cpu];
	g->member[g->nr++] = e;
	enabled[e] = true;
	return 0;
}

static int pmu_start(const struct xt_options *opt)
{
	bool hardware = true;
	int err = 0, used = 0;
	size_t e;

	(void)opt;
	memset(fds, -1, sizeof(fds));
	memset(groups, 0, sizeof(groups));
	for (e = 0; e < NR_EVENTS; e++) {
		if (events[e].hardware && !hardware)
			continue;
		err = open_event(e);
		if (err && events[e].hardware) {
			/* No cycles counter: a host without a (virtualized) PMU. */
			hardware &= e != 0;
			continue;
		}
		if (err)
			return err;
		ids[e] = xt_signal_add(events[e].name, events[e].unit, "counter",
				       events[e].hardware ? "perf_event:hardware"
							  : "perf_event:software");
		used++;
	}
	xt_catalog_set_pmu(hardware);
	pmu_collect(0);
	return used ? 0 : err;
}

const struct xt_family pmu_family = {
	.name = "pmu",
	.summary = "hardware counters where present (else pmu: unavailable) and software events",
	.start = pmu_start,
	.collect = pmu_collect,
	.stop = pmu_stop,
};
