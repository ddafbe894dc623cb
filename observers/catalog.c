// SPDX-License-Identifier: MIT
/* The signal catalog: names, units, kinds and sources of the ids that frames carry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observer.h"

struct signal_info {
	char name[96];
	char unit[16];
	char kind[16];
	char source[96];
};

static struct signal_info signals[XT_FRAME_MAX_ITEMS + 1];
static int nr_signals;
static bool pmu_available;
static uint64_t generation = 1;
static char json[256 * 1024];

int xt_signal_add(const char *name, const char *unit, const char *kind, const char *source)
{
	struct signal_info *s;

	if (nr_signals >= XT_FRAME_MAX_ITEMS) {
		fprintf(stderr, "xobserve: more than %d signals; %s left out\n", XT_FRAME_MAX_ITEMS,
			name);
		return 0;
	}
	s = &signals[++nr_signals];
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->unit, sizeof(s->unit), "%s", unit);
	snprintf(s->kind, sizeof(s->kind), "%s", kind);
	snprintf(s->source, sizeof(s->source), "%s", source);
	generation++;
	return nr_signals;
}

int xt_signal_count(void)
{
	return nr_signals;
}

const char *xt_signal_name(uint32_t id)
{
	return id && id <= (uint32_t)nr_signals ? signals[id].name : "?";
}

void xt_catalog_set_pmu(bool available)
{
	pmu_available = available;
	generation++;
}

bool xt_catalog_pmu(void)
{
	return pmu_available;
}

uint64_t xt_catalog_generation(void)
{
	return generation;
}

const char *xt_catalog_json(uint64_t window_ns, size_t *len)
{
	size_t n = 0;
	int i;

	n += snprintf(json + n, sizeof(json) - n,
		      "{\"version\": 1, \"window_ns\": %llu, \"pmu\": \"%s\", \"signals\": [",
		      (unsigned long long)window_ns, pmu_available ? "available" : "unavailable");
	for (i = 1; i <= nr_signals && n < sizeof(json); i++)
		n += snprintf(
			json + n, sizeof(json) - n,
			"%s{\"id\": %d, \"name\": \"%s\", \"unit\": \"%s\", \"kind\": \"%s\", "
			"\"source\": \"%s\"}",
			i > 1 ? ", " : "", i, signals[i].name, signals[i].unit, signals[i].kind,
			signals[i].source);
	if (n < sizeof(json))
		n += snprintf(json + n, sizeof(json) - n, "]}");
	*len = n < sizeof(json) ? n : sizeof(json) - 1;
	return json;
}
