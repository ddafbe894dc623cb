// SPDX-License-Identifier: MIT
/* Requests on one knob: register, unregister, set, get, and list. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

int op_register(struct request *r, struct jbuf *out)
{
	struct knob_spec spec = {0};
	const struct json *en = json_get(r->j, "enum");
	struct xrtd_knob *k;
	bool has_step;
	int ret;

	if ((ret = field_str(r, "name", true, &spec.name)) ||
	    (ret = field_str(r, "backend", true, &spec.backend)) ||
	    (ret = field_str(r, "target", true, &spec.target)) ||
	    (ret = field_str(r, "netns", false, &spec.netns)) ||
	    (ret = field_int(r, "min", &spec.has_min, &spec.min)) ||
	    (ret = field_int(r, "max", &spec.has_max, &spec.max)) ||
	    (ret = field_int(r, "step", &has_step, &spec.step)))
		return ret;
	if (en) {
		if (en->type != JSON_ARRAY)
			return xrtd_errf(r->err, EINVAL,
					 "register: field 'enum' must be a list of "
					 "strings");
		for (const struct json *v = en->child; v; v = v->next) {
			if (v->type != JSON_STRING)
				return xrtd_errf(r->err, EINVAL,
						 "register: 'enum' holds a %s, not a "
						 "string",
						 json_type_name(v->type));
			if (spec.enum_count == XRTD_ENUM_MAX)
				return xrtd_errf(r->err, E2BIG,
						 "register: more than %d enum values",
						 XRTD_ENUM_MAX);
			spec.enum_values[spec.enum_count++] = v->s;
		}
		if (!spec.enum_count)
			return xrtd_errf(r->err, EINVAL, "register: 'enum' is empty");
	}
	ret = knob_add(&spec, &k, r->err);
	if (ret)
		return ret;
	knob_own(k, r->client);
	jb_printf(out, ",\"knob\":");
	knob_json(out, k);
	return 0;
}

int op_unregister(struct request *r, struct jbuf *out)
{
	struct xrtd_knob *k;
	int ret = find_knob(r, &k);

	if (ret)
		return ret;
	jb_printf(out, ",\"knob\":{\"name\":");
	jb_str(out, k->name);
	jb_printf(out, ",\"state\":\"unregistered\"}");
	return knob_remove(k, "unregister", r->err);
}

int op_set(struct request *r, struct jbuf *out)
{
	struct xrtd_knob *k;
	const char *reason;
	int64_t value = 0;
	int ret;

	if ((ret = find_knob(r, &k)) || (ret = value_of(r, k, &value)) ||
	    (ret = field_str(r, "reason", false, &reason)))
		return ret;
	if (r->txn->id) {
		struct txn_set *s = NULL;

		ret = knob_check(k, value, r->err);
		if (ret)
			return ret;
		for (int i = 0; i < r->txn->count && !s; i++)
			if (r->txn->sets[i].slot == k->slot)
				s = &r->txn->sets[i];
		if (!s)
			s = &r->txn->sets[r->txn->count++];
		*s = (struct txn_set){
			.slot = k->slot, .reg_gen = k->shared->reg_gen, .value = value};
		snprintf(s->reason, sizeof(s->reason), "%s", reason ? reason : "");
		jb_printf(out, ",\"queued\":true,\"txn\":%" PRIu64, r->txn->id);
		return 0;
	}
	ret = knob_set(k, value, reason, "socket", r->err);
	if (ret)
		return ret;
	knob_own(k, r->client);
	jb_printf(out, ",\"knob\":");
	knob_json(out, k);
	return 0;
}

int op_get(struct request *r, struct jbuf *out)
{
	struct xrtd_knob *k;
	int ret = find_knob(r, &k);

	if (ret)
		return ret;
	jb_printf(out, ",\"knob\":");
	knob_json(out, k);
	return 0;
}

int op_list(struct request *r, struct jbuf *out)
{
	(void)r;
	knobs_json(out, NULL);
	return 0;
}
