// SPDX-License-Identifier: MIT
/* What a knob is, as JSON fields: one renderer for the journal records and the control replies. */
#include "json.h"
#include "registry.h"

void knob_json_fields(struct jbuf *b, const struct xrtd_knob *k)
{
	jb_printf(b, ",\"backend\":");
	jb_str(b, k->backend->name);
	jb_printf(b, ",\"target\":");
	jb_str(b, k->target);
	jb_printf(b, ",\"netns\":");
	jb_str(b, k->netns);
	jb_printf(b, ",\"type\":\"%s\",\"enum\":[", k->type == XT_KNOB_ENUM ? "enum" : "int");
	for (int i = 0; i < k->enum_count; i++) {
		jb_printf(b, i ? "," : "");
		jb_str(b, k->enum_values[i]);
	}
	jb_printf(b, "]");
}
