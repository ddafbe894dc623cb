// SPDX-License-Identifier: MIT
/*
 * Recovery on start: every knob the journal of the last run left armed (neither restored nor
 * kept) is put back to its original, whatever today's allow-list says (the crash rule: undo what
 * the dead xrtd changed). Then every knob it left registered is registered again, checked like a
 * new registration (target, allow-list), in its old slot, at the value found now: its original
 * once replay put that back. A registration that cannot come back (its target is gone, no longer
 * allowed, or its original could not be put back) is dropped and audited with the reason. Then a
 * fresh journal begins, holding the registrations.
 */
#include <stdio.h>
#include <stdlib.h>

#include "apply.h"

/* Put the journaled original back; 0 when the system runs with it now. */
static int restore_journaled(struct xrtd_knob *k, char err[XRTD_ERR_LEN])
{
	int64_t now = 0;
	int ret;

	ret = k->backend->validate(k, err);
	if (!ret)
		ret = k->backend->read(k, &now, err);
	if (!ret && now != k->original)
		ret = k->backend->restore ? k->backend->restore(k, k->original, err)
					  : k->backend->write(k, k->original, err);
	if (ret) {
		fprintf(stderr, "xrtd: journal replay: cannot restore %s (%s): %s\n", k->name,
			k->target, err);
		audit_change(k, now, k->original, "restore-failed", "journal replay after a crash",
			     "replay");
	} else if (now != k->original) {
		fprintf(stderr, "xrtd: journal replay: restored %s (%s)\n", k->name, k->target);
		audit_change(k, now, k->original, "restored", "journal replay after a crash",
			     "replay");
	}
	if (k->backend->release)
		k->backend->release(k);
	k->priv = NULL;
	return ret;
}

static void register_again(const struct xrtd_knob *j)
{
	struct knob_spec spec = {
		.name = j->name,
		.backend = j->backend->name,
		.target = j->target,
		.netns = j->netns,
		.has_slot = true,
		.slot = j->slot,
	};
	char err[XRTD_ERR_LEN];
	struct xrtd_knob *k;

	if (j->type == XT_KNOB_ENUM) {
		for (int i = 0; i < j->enum_count; i++)
			spec.enum_values[i] = j->enum_values[i];
		spec.enum_count = j->enum_count;
	} else {
		spec.has_min = spec.has_max = true;
		spec.min = j->min;
		spec.max = j->max;
		spec.step = j->step;
	}
	if (knob_register(&spec, &k, err)) {
		fprintf(stderr, "xrtd: registration of %s dropped: %s\n", j->name, err);
		audit_registration(j, "registration-dropped", err);
		return;
	}
	audit_registration(k, "registration-restored", "registered before xrtd restarted");
}

int recovery_run(const char *state_dir, bool journal_sync_all, char err[XRTD_ERR_LEN])
{
	struct journal_knob *journaled;
	int n, bad;

	journal_init(state_dir, journal_sync_all);
	bad = journal_read(&journaled, &n, err);
	if (bad < 0)
		return bad;
	allow_replaying(true);
	for (int i = n - 1; i >= 0; i--) {
		struct journal_knob *e = &journaled[i];
		char why[XRTD_ERR_LEN];

		if (e->armed && restore_journaled(&e->k, why) && e->registered) {
			char reason[XRTD_ERR_LEN + 40];

			snprintf(reason, sizeof(reason), "its original could not be put back: %s",
				 why);
			audit_registration(&e->k, "registration-dropped", reason);
			e->registered = false; /* its value now is not an original */
		}
	}
	allow_replaying(false);
	for (int i = 0; i < n; i++)
		if (journaled[i].registered)
			register_again(&journaled[i].k);
	free(journaled);
	if (bad > 0)
		fprintf(stderr, "xrtd: journal had %d unreadable records\n", bad);
	return journal_start(err);
}
