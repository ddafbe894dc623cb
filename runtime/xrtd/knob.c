// SPDX-License-Identifier: MIT
/* Knob registration, lookup, checks and the helpers backends share. */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xrtd.h"

#define ALLOW_MAX 64

extern const struct xrtd_backend *const __start_xrtd_backends[];
extern const struct xrtd_backend *const __stop_xrtd_backends[];

struct allow_rule {
	char backend[16];
	char glob[XT_KNOB_TARGET_LEN];
};

static struct allow_rule allow_rules[ALLOW_MAX];
static int allow_count;
static bool allow_given[8]; /* per backend id: --allow replaces the defaults */

static const struct allow_rule default_rules[] = {
	{"sysctl", "net.*"},
	{"sysctl", "vm.dirty_*"},
	{"sysctl", "vm.swappiness"},
	{"sysctl", "kernel.sched_*"},
	{"sysfs", "/sys/block/*/queue/*"},
	{"sysfs", "/sys/kernel/mm/transparent_hugepage/*"},
	{"bpf", "/sys/fs/bpf/*"},
};

const struct xrtd_backend *xrtd_backend_by_name(const char *name)
{
	for (const struct xrtd_backend *const *b = __start_xrtd_backends; b < __stop_xrtd_backends;
	     b++)
		if (!strcmp((*b)->name, name))
			return *b;
	return NULL;
}

int xrtd_errf(char err[XRTD_ERR_LEN], int errnum, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, XRTD_ERR_LEN, fmt, ap);
	va_end(ap);
	return -(errnum ? errnum : EINVAL);
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
	if (xrtd.replaying)
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

static int enum_index(const struct xrtd_knob *k, const char *word, size_t len)
{
	for (int i = 0; i < k->enum_count; i++)
		if (strlen(k->enum_values[i]) == len && !strncmp(k->enum_values[i], word, len))
			return i;
	return -1;
}

int xrtd_knob_parse(const struct xrtd_knob *k, const char *text, int64_t *value,
		    char err[XRTD_ERR_LEN])
{
	const char *s = text, *open = strchr(text, '['), *close;
	size_t len;
	char *end;

	if (open) { /* "a [b] c": the selected word */
		close = strchr(open, ']');
		if (!close)
			return xrtd_errf(err, EINVAL, "%s: unbalanced '[' in '%s'", k->target,
					 text);
		s = open + 1;
		len = close - s;
	} else {
		while (*s == ' ' || *s == '\t')
			s++;
		len = strcspn(s, " \t\n");
	}
	if (k->type == XT_KNOB_ENUM) {
		int i = enum_index(k, s, len);

		if (i < 0)
			return xrtd_errf(err, EINVAL,
					 "%s: value '%.*s' is not one of the knob's enum values",
					 k->target, (int)len, s);
		*value = i;
		return 0;
	}
	if (open)
		return xrtd_errf(err, EINVAL,
				 "%s: holds an enum ('%s'); register it with enum values",
				 k->target, text);
	errno = 0;
	*value = strtoll(s, &end, 10);
	if (errno || end == s || end != s + len)
		return xrtd_errf(err, EINVAL, "%s: '%.*s' is not an integer", k->target, (int)len,
				 s);
	return 0;
}

int xrtd_knob_format(const struct xrtd_knob *k, int64_t value, char *buf, size_t len)
{
	if (k->type == XT_KNOB_ENUM) {
		if (value < 0 || value >= k->enum_count)
			return -ERANGE;
		return snprintf(buf, len, "%s", k->enum_values[value]) < (int)len ? 0 : -ENOSPC;
	}
	return snprintf(buf, len, "%" PRId64, value) < (int)len ? 0 : -ENOSPC;
}

struct xrtd_knob *knob_find(const char *name)
{
	for (int i = 0; i < XT_KNOB_MAX; i++)
		if (xrtd.knobs[i] && !strcmp(xrtd.knobs[i]->name, name))
			return xrtd.knobs[i];
	return NULL;
}

int knob_check(const struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	if (value < k->min || value > k->max) {
		if (k->type == XT_KNOB_ENUM)
			return xrtd_errf(err, ERANGE,
					 "knob %s: enum index %" PRId64 " out of range 0..%" PRId64,
					 k->name, value, k->max);
		return xrtd_errf(err, ERANGE,
				 "knob %s: value %" PRId64 " out of bounds [%" PRId64 ", %" PRId64
				 "]",
				 k->name, value, k->min, k->max);
	}
	if (k->step > 1 && (value - k->min) % k->step)
		return xrtd_errf(err, ERANGE,
				 "knob %s: value %" PRId64 " is not min %" PRId64
				 " plus a multiple of step %" PRId64,
				 k->name, value, k->min, k->step);
	return 0;
}

static bool valid_name(const char *s)
{
	if (!*s || strlen(s) >= XT_KNOB_NAME_LEN)
		return false;
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
		    !(*s >= '0' && *s <= '9') && !strchr("_.-:", *s))
			return false;
	return true;
}

void knob_free(struct xrtd_knob *k)
{
	if (k->backend && k->backend->release)
		k->backend->release(k);
	free(k);
}

static int knob_init(struct xrtd_knob *k, const struct knob_spec *spec, char err[XRTD_ERR_LEN])
{
	int ret;

	if (!valid_name(spec->name))
		return xrtd_errf(err, EINVAL,
				 "register: name '%s' must be 1..%d characters of "
				 "[A-Za-z0-9_.:-]",
				 spec->name, XT_KNOB_NAME_LEN - 1);
	k->backend = xrtd_backend_by_name(spec->backend);
	if (!k->backend)
		return xrtd_errf(err, EINVAL, "register %s: unknown backend '%s'", spec->name,
				 spec->backend);
	if (!*spec->target || strlen(spec->target) >= XT_KNOB_TARGET_LEN)
		return xrtd_errf(err, EINVAL, "register %s: target must be 1..%d characters",
				 spec->name, XT_KNOB_TARGET_LEN - 1);
	if (spec->netns && strlen(spec->netns) >= XRTD_NETNS_LEN)
		return xrtd_errf(err, EINVAL, "register %s: netns path too long", spec->name);
	snprintf(k->name, sizeof(k->name), "%s", spec->name);
	snprintf(k->target, sizeof(k->target), "%s", spec->target);
	snprintf(k->netns, sizeof(k->netns), "%s", spec->netns ? spec->netns : "");
	for (int i = 0; i < spec->enum_count; i++) {
		const char *v = spec->enum_values[i];

		if (!*v || strlen(v) >= XRTD_ENUM_LEN || strpbrk(v, " \t\n[]"))
			return xrtd_errf(err, EINVAL,
					 "register %s: enum value '%s' must be 1..%d "
					 "characters without blanks or brackets",
					 k->name, v, XRTD_ENUM_LEN - 1);
		snprintf(k->enum_values[i], XRTD_ENUM_LEN, "%s", v);
	}
	k->enum_count = spec->enum_count;
	k->type = spec->enum_count ? XT_KNOB_ENUM : XT_KNOB_INT;
	ret = k->backend->validate(k, err);
	if (ret)
		return ret;
	if (k->type == XT_KNOB_ENUM) {
		if (spec->has_min || spec->has_max)
			return xrtd_errf(err, EINVAL, "register %s: enum knobs take no min/max",
					 k->name);
		k->min = 0;
		k->max = k->enum_count - 1;
		k->step = 1;
	} else {
		if (!spec->has_min || !spec->has_max)
			return xrtd_errf(err, EINVAL, "register %s: integer knobs need min and max",
					 k->name);
		if (spec->min > spec->max)
			return xrtd_errf(err, EINVAL, "register %s: min %" PRId64 " > max %" PRId64,
					 k->name, spec->min, spec->max);
		if (spec->step < 0)
			return xrtd_errf(err, EINVAL, "register %s: step must be >= 0", k->name);
		k->min = spec->min;
		k->max = spec->max;
		k->step = spec->step ? spec->step : 1;
	}
	ret = k->backend->read(k, &k->original, err);
	if (ret) {
		char why[XRTD_ERR_LEN];

		snprintf(why, sizeof(why), "%s", err);
		return xrtd_errf(err, -ret, "register %s: reading the current value: %s", k->name,
				 why);
	}
	k->applied = k->good = k->original;
	return 0;
}

int knob_register(const struct knob_spec *spec, struct xrtd_knob **out, char err[XRTD_ERR_LEN])
{
	struct xrtd_knob *k;
	int slot = -1, ret;

	if (knob_find(spec->name))
		return xrtd_errf(err, EEXIST, "register: knob '%s' already exists", spec->name);
	for (int i = 0; i < XT_KNOB_MAX && slot < 0; i++)
		if (!xrtd.knobs[i])
			slot = i;
	if (slot < 0)
		return xrtd_errf(err, ENOSPC, "register %s: the table is full (%d knobs)",
				 spec->name, XT_KNOB_MAX);
	k = calloc(1, sizeof(*k));
	if (!k)
		return xrtd_errf(err, ENOMEM, "register %s: out of memory", spec->name);
	ret = knob_init(k, spec, err);
	if (ret) {
		knob_free(k);
		return ret;
	}
	for (int i = 0; i < XT_KNOB_MAX; i++) {
		struct xrtd_knob *o = xrtd.knobs[i];

		if (o && o->backend == k->backend && !strcmp(o->target, k->target) &&
		    !strcmp(o->netns, k->netns)) {
			ret = xrtd_errf(err, EEXIST, "register %s: target %s is already knob '%s'",
					k->name, k->target, o->name);
			knob_free(k);
			return ret;
		}
	}
	k->slot = slot;
	k->shared = table_slot(slot);
	xrtd.knobs[slot] = k;
	table_fill_slot(k);
	if (slot >= xrtd.slots_used)
		__atomic_store_n(&xrtd.slots_used, slot + 1, __ATOMIC_RELEASE);
	*out = k;
	return 0;
}

int knob_unregister(struct xrtd_knob *k, char err[XRTD_ERR_LEN])
{
	if (k->armed && !k->kept) {
		int ret = knob_revert(k, k->original, "unregister", err);

		if (ret)
			return ret;
	}
	xrtd.knobs[k->slot] = NULL;
	table_free_slot(k->slot);
	knob_free(k);
	return 0;
}
