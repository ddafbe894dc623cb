// SPDX-License-Identifier: MIT
/* Reading a request's fields: each failure names the op and the field. */
#include <errno.h>
#include <string.h>

#include "ops.h"

int field_str(struct request *r, const char *key, bool required, const char **out)
{
	const struct json *f = json_get(r->j, key);

	*out = NULL;
	if (!f)
		return required ? xrtd_errf(r->err, EINVAL, "%s: missing field '%s'", r->op, key)
				: 0;
	if (f->type != JSON_STRING)
		return xrtd_errf(r->err, EINVAL, "%s: field '%s' must be a string, not %s", r->op,
				 key, json_type_name(f->type));
	*out = f->s;
	return 0;
}

int field_int(struct request *r, const char *key, bool *present, int64_t *out)
{
	const struct json *f = json_get(r->j, key);

	*present = f != NULL;
	if (!f)
		return 0;
	if (f->type != JSON_INT)
		return xrtd_errf(r->err, EINVAL, "%s: field '%s' must be an integer, not %s", r->op,
				 key, json_type_name(f->type));
	*out = f->i;
	return 0;
}

int field_names(struct request *r, const struct json **out)
{
	const struct json *f = json_get(r->j, "names");

	*out = NULL;
	if (!f)
		return 0;
	if (f->type != JSON_ARRAY)
		return xrtd_errf(r->err, EINVAL, "%s: field 'names' must be a list of knob names",
				 r->op);
	for (const struct json *n = f->child; n; n = n->next) {
		if (n->type != JSON_STRING)
			return xrtd_errf(r->err, EINVAL, "%s: 'names' holds a %s, not a name",
					 r->op, json_type_name(n->type));
		if (!knob_find(n->s))
			return xrtd_errf(r->err, ENOENT, "%s: unknown knob '%s'", r->op, n->s);
	}
	*out = f;
	return 0;
}

bool named(const struct json *names, const struct xrtd_knob *k)
{
	if (!names)
		return true;
	for (const struct json *n = names->child; n; n = n->next)
		if (!strcmp(n->s, k->name))
			return true;
	return false;
}

int find_knob(struct request *r, struct xrtd_knob **k)
{
	const char *name;
	int ret = field_str(r, "name", true, &name);

	if (ret)
		return ret;
	*k = knob_find(name);
	if (!*k)
		return xrtd_errf(r->err, ENOENT, "%s: unknown knob '%s'", r->op, name);
	return 0;
}

/* A value given as an integer, or for enum knobs as one of its strings. */
int value_of(struct request *r, const struct xrtd_knob *k, int64_t *value)
{
	const struct json *v = json_get(r->j, "value");

	if (!v)
		return xrtd_errf(r->err, EINVAL, "%s %s: missing field 'value'", r->op, k->name);
	if (v->type == JSON_INT) {
		*value = v->i;
		return 0;
	}
	if (v->type == JSON_STRING && k->type == XT_KNOB_ENUM) {
		for (int i = 0; i < k->enum_count; i++)
			if (!strcmp(k->enum_values[i], v->s)) {
				*value = i;
				return 0;
			}
		return xrtd_errf(r->err, EINVAL, "%s %s: '%s' is not one of the knob's enum values",
				 r->op, k->name, v->s);
	}
	return xrtd_errf(r->err, EINVAL, "%s %s: field 'value' must be %s, not %s", r->op, k->name,
			 k->type == XT_KNOB_ENUM ? "an index or an enum string" : "an integer",
			 json_type_name(v->type));
}
