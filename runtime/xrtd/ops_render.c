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
	knob_json_fields(b, k);
	jb_printf(b,
		  ",\"slot\":%d,\"min\":%" PRId64 ",\"max\":%" PRId64 ",\"step\":%" PRId64
		  ",\"original\":%" PRId64 ",\"applied\":%" PRId64 ",\"good\":%" PRId64
		  ",\"text\":",
		  k->slot, k->min, k->max, k->step, k->original, k->applied, k->good);
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
