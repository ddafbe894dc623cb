// SPDX-License-Identifier: MIT
/* The allow-list: which targets each backend may touch (--allow BACKEND:GLOB, or the defaults). */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"

#define ALLOW_MAX 64

struct allow_rule {
	char backend[16];
	char glob[XT_KNOB_TARGET_LEN];
};

static struct allow_rule allow_rules[ALLOW_MAX];
static int allow_count;
static bool allow_given[8]; /* per backend id: --allow replaces the defaults */
static bool replaying;	    /* journal replay: restoring originals, the allow-list does not apply */

static const struct allow_rule default_rules[] = {
	{"sysctl", "net.*"},
	{"sysctl", "vm.dirty_*"},
	{"sysctl", "vm.swappiness"},
	{"sysctl", "kernel.sched_*"},
	{"sysfs", "/sys/block/*/queue/*"},
	{"sysfs", "/sys/kernel/mm/transparent_hugepage/*"},
	{"bpf", "/sys/fs/bpf/*"},
	{"sie-user", "/*"}, /* a process's executable; its plan is checked against its build id */
};

void allow_replaying(bool on)
{
	replaying = on;
}

int allow_add(const char *spec, char err[XRTD_ERR_LEN])
{
	const char *colon = strchr(spec, ':');
	const struct xrtd_backend *b;
	char name[16];

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(name) || !colon[1])
		return xrtd_errf(err, EINVAL, "--allow %s: expected BACKEND:GLOB", spec);
	snprintf(name, sizeof(name), "%.*s", (int)(colon - spec), spec);
	b = xrtd_backend_by_name(name);
	if (!b)
		return xrtd_errf(err, EINVAL, "--allow %s: unknown backend '%s'", spec, name);
	if (allow_count == ALLOW_MAX || strlen(colon + 1) >= XT_KNOB_TARGET_LEN)
		return xrtd_errf(err, E2BIG, "--allow %s: too many rules or glob too long", spec);
	snprintf(allow_rules[allow_count].backend, sizeof(allow_rules[0].backend), "%s", name);
	snprintf(allow_rules[allow_count].glob, sizeof(allow_rules[0].glob), "%s", colon + 1);
	allow_count++;
	allow_given[b->id] = true;
	return 0;
}

bool xrtd_allowed(const char *backend, const char *subject)
{
	const struct xrtd_backend *b = xrtd_backend_by_name(backend);

	/* Putting back a journaled original is always allowed, whatever today's rules say. */
	if (replaying)
		return true;
	for (int i = 0; i < allow_count; i++)
		if (!strcmp(allow_rules[i].backend, backend) &&
		    !fnmatch(allow_rules[i].glob, subject, 0))
			return true;
	if (b && allow_given[b->id])
		return false;
	for (size_t i = 0; i < sizeof(default_rules) / sizeof(default_rules[0]); i++)
		if (!strcmp(default_rules[i].backend, backend) &&
		    !fnmatch(default_rules[i].glob, subject, 0))
			return true;
	return false;
}
