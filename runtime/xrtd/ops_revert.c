// SPDX-License-Identifier: MIT
/* Requests on many knobs at once: rollback, and marking values good or kept. */
#include <errno.h>
#include <string.h>

#include "ops.h"

int op_rollback(struct request *r, struct jbuf *out)
{
	const char *to, *reason;
	const struct json *names;
	bool to_good;
	int ret;

	if ((ret = field_str(r, "to", false, &to)) ||
	    (ret = field_str(r, "reason", false, &reason)) || (ret = field_names(r, &names)))
		return ret;
	if (to && strcmp(to, "original") && strcmp(to, "good"))
		return xrtd_errf(r->err, EINVAL,
				 "rollback: 'to' must be 'original' or 'good', not "
				 "'%s'",
				 to);
	to_good = to && !strcmp(to, "good");
	for (int i = XT_KNOB_MAX - 1; i >= 0; i--) {
		struct xrtd_knob *k = knob_at(i);

		if (!k || !named(names, k))
			continue;
		ret = knob_revert(k, to_good ? k->good : k->original,
				  reason && *reason ? reason : "rollback requested", r->err);
		if (ret)
			return ret;
	}
	knobs_json(out, names);
	return 0;
}

static int op_mark(struct request *r, struct jbuf *out, bool keep)
{
	const struct json *names;
	int ret = field_names(r, &names);

	if (ret)
		return ret;
	for (int i = 0; i < XT_KNOB_MAX; i++) {
		struct xrtd_knob *k = knob_at(i);

		if (!k || !named(names, k))
			continue;
		k->good = k->applied;
		if (keep && k->armed && !k->kept) {
			ret = journal_keep(k);
			if (ret)
				return xrtd_errf(r->err, -ret, "keep %s: journal write failed",
						 k->name);
			k->kept = true;
		}
	}
	knobs_json(out, names);
	return 0;
}

int op_good(struct request *r, struct jbuf *out)
{
	return op_mark(r, out, false);
}

int op_keep(struct request *r, struct jbuf *out)
{
	return op_mark(r, out, true);
}
