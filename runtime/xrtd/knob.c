// SPDX-License-Identifier: MIT
/* The knob registry: registration, lookup and checks; owns the knobs by slot. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static struct xrtd_knob *knobs[XT_KNOB_MAX]; /* by slot */
static int slots_used; /* one past the highest slot ever registered: the watcher scans no further */

struct xrtd_knob *knob_at(int slot)
{
	return knobs[slot];
}

int knob_slots_used(void)
{
	return __atomic_load_n(&slots_used, __ATOMIC_ACQUIRE);
}

int knob_count(void)
{
	int n = 0;

	for (int i = 0; i < XT_KNOB_MAX; i++)
		n += knobs[i] != NULL;
	return n;
}

struct xrtd_knob *knob_find(const char *name)
{
	for (int i = 0; i < XT_KNOB_MAX; i++)
		if (knobs[i] && !strcmp(knobs[i]->name, name))
			return knobs[i];
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
	return k->backend->check ? k->backend->check(k, value, err) : 0;
}

bool xrtd_name_valid(const char *s, size_t size)
{
	if (!*s || strlen(s) >= size)
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

	if (!xrtd_name_valid(spec->name, XT_KNOB_NAME_LEN))
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

void knob_own(struct xrtd_knob *k, const char *client)
{
	snprintf(k->client, sizeof(k->client), "%s", client);
}

bool knob_matches(const struct xrtd_knob *k, const struct knob_spec *spec)
{
	if (strcmp(k->backend->name, spec->backend) || strcmp(k->target, spec->target) ||
	    strcmp(k->netns, spec->netns ? spec->netns : ""))
		return false;
	if (spec->enum_count) {
		if (k->type != XT_KNOB_ENUM || k->enum_count != spec->enum_count)
			return false;
		for (int i = 0; i < spec->enum_count; i++)
			if (strcmp(k->enum_values[i], spec->enum_values[i]))
				return false;
		return true;
	}
	if (k->type == XT_KNOB_ENUM) /* its values taken from the target (sysfs) */
		return !spec->has_min && !spec->has_max;
	return spec->has_min && spec->has_max && spec->min == k->min && spec->max == k->max &&
	       (spec->step ? spec->step : 1) == k->step;
}

int knob_register(const struct knob_spec *spec, struct xrtd_knob **out, char err[XRTD_ERR_LEN])
{
	struct xrtd_knob *k;
	int slot = -1, ret;

	if (knob_find(spec->name))
		return xrtd_errf(err, EEXIST,
				 "register: knob '%s' already exists with another backend, target, "
				 "netns or bounds",
				 spec->name);
	if (spec->has_slot && spec->slot >= 0 && spec->slot < XT_KNOB_MAX && !knobs[spec->slot])
		slot = spec->slot;
	for (int i = 0; i < XT_KNOB_MAX && slot < 0; i++)
		if (!knobs[i])
			slot = i;
	if (slot < 0)
		return xrtd_errf(err, ENOSPC, "register %s: the table is full (%d knobs)",
				 spec->name, XT_KNOB_MAX);
	k = calloc(1, sizeof(*k));
	if (!k)
		return xrtd_errf(err, ENOMEM, "register %s: out of memory", spec->name);
	k->slot = slot; /* backends may name their files after it */
	ret = knob_init(k, spec, err);
	if (ret) {
		knob_free(k);
		return ret;
	}
	for (int i = 0; i < XT_KNOB_MAX; i++) {
		struct xrtd_knob *o = knobs[i];

		if (o && o->backend == k->backend && !strcmp(o->target, k->target) &&
		    !strcmp(o->netns, k->netns)) {
			ret = xrtd_errf(err, EEXIST, "register %s: target %s is already knob '%s'",
					k->name, k->target, o->name);
			knob_free(k);
			return ret;
		}
	}
	k->shared = table_slot(slot);
	knobs[slot] = k;
	table_fill_slot(k);
	if (slot >= slots_used)
		__atomic_store_n(&slots_used, slot + 1, __ATOMIC_RELEASE);
	*out = k;
	return 0;
}

void knob_unregister(struct xrtd_knob *k)
{
	knobs[k->slot] = NULL;
	table_free_slot(k->slot);
	knob_free(k);
}

void knobs_free_all(void)
{
	for (int i = 0; i < XT_KNOB_MAX; i++)
		if (knobs[i]) {
			knob_free(knobs[i]);
			knobs[i] = NULL;
		}
}
