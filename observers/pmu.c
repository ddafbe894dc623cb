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

static int fds[NR_EVENTS][XT_MAX_CPUS];
static bool enabled[NR_EVENTS];
static uint64_t prev[NR_EVENTS];
static int ids[NR_EVENTS];

static int open_counter(const struct pmu_event *e, int cpu)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = e->type,
		.config = e->config,
	};

	return syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static uint64_t total(size_t e)
{
	uint64_t sum = 0, v;
	int cpu;

	for (cpu = 0; cpu < xt_nr_cpus(); cpu++)
		if (fds[e][cpu] >= 0 && read(fds[e][cpu], &v, sizeof(v)) == sizeof(v))
			sum += v;
	return sum;
}

static void pmu_collect(uint64_t window_ns)
{
	uint64_t now;
	size_t e;

	for (e = 0; e < NR_EVENTS; e++) {
		if (!enabled[e])
			continue;
		now = total(e);
		xt_emit(ids[e], now - prev[e]);
		prev[e] = now;
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
}

/* An event is used only if it opens on every CPU. */
static int open_event(size_t e)
{
	int cpu, err;

	for (cpu = 0; cpu < xt_nr_cpus(); cpu++) {
		fds[e][cpu] = open_counter(&events[e], cpu);
		if (fds[e][cpu] < 0) {
			err = -errno;
			while (cpu--)
				close(fds[e][cpu]);
			return err;
		}
	}
	enabled[e] = true;
	return 0;
}

static int pmu_start(const struct xt_options *opt)
{
	bool hardware = true;
	int err = 0, used = 0;
	size_t e;

	memset(fds, -1, sizeof(fds));
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
