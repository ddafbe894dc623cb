// SPDX-License-Identifier: MIT
/* Knobs as JSON in replies. */
#include <inttypes.h>

#include "ops.h"

static const char *const state_names[] = {"free",    "registered", "applying",	 "applied",
					  "refused", "failed",	   "rolled_back"};

void knob_json(struct jbuf *b, const struct xrtd_knob *k)
{
	char text[XRTD_ENUM_LEN + 32];
	uint32_t state = __atomic_load_n(&k->shared->state, __ATOMIC_RELAXED);

	xrtd_knob_format(k, k->applied, text, sizeof(text));
	jb_printf(b, "{\"name\":");
	jb_str(b, k->name);
	jb_printf(b, ",\"backend\":");
	jb_str(b, k->backend->name);
	jb_printf(b, ",\"target\":");
	jb_str(b, k->target);
	jb_printf(b, ",\"netns\":");
	jb_str(b, k->netns);
	jb_printf(b,
		  ",\"slot\":%d,\"type\":\"%s\",\"min\":%" PRId64 ",\"max\":%" PRId64
		  ",\"step\":%" PRId64 ",\"enum\":[",
		  k->slot, k->type == XT_KNOB_ENUM ? "enum" : "int", k->min, k->max, k->step);
	for (int i = 0; i < k->enum_count; i++) {
		jb_printf(b, i ? "," : "");
		jb_str(b, k->enum_values[i]);
	}
	jb_printf(b,
		  "],\"original\":%" PRId64 ",\"applied\":%" PRId64 ",\"good\":%" PRId64
		  ",\"text\":",
		  k->original, k->applied, k->good);
	jb_str(b, text);
	jb_printf(b, ",\"state\":\"%s\",\"armed\":%s,\"kept\":%s,\"client\":",
		  state < sizeof(state_names) / sizeof(state_names[0]) ? state_names[state] : "?",
		  k->armed ? "true" : "false", k->kept ? "true" : "false");
	jb_str(b, k->client);
	jb_printf(b, "}");
}

void knobs_json(struct jbuf *b, const struct json *names)
{
	bool first = true;

	jb_printf(b, ",\"knobs\":[");
	for (int i = 0; i < XT_KNOB_MAX; i++) {
		if (!knob_at(i) || !named(names, knob_at(i)))
			continue;
		jb_printf(b, first ? "" : ",");
		knob_json(b, knob_at(i));
		first = false;
	}
	jb_printf(b, "]");
}
