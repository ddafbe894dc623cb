// SPDX-License-Identifier: MIT
/*
 * Crash recovery: on start, every knob the journal of the last run left armed (neither restored
 * nor kept) is put back to its original, whatever today's allow-list says; then a fresh journal
 * begins.
 */
#include <stdio.h>
#include <stdlib.h>

#include "apply.h"

static void restore_journaled(struct journal_knob *e)
{
	struct xrtd_knob *k = &e->k;
	char err[XRTD_ERR_LEN] = "";
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
}

int recovery_run(const char *state_dir, bool journal_sync_all, char err[XRTD_ERR_LEN])
{
	struct journal_knob *armed;
	int n, bad;

	journal_init(state_dir, journal_sync_all);
	bad = journal_read(&armed, &n, err);
	if (bad < 0)
		return bad;
	allow_replaying(true);
	for (int i = n - 1; i >= 0; i--)
		if (armed[i].armed)
			restore_journaled(&armed[i]);
	allow_replaying(false);
	free(armed);
	if (bad > 0)
		fprintf(stderr, "xrtd: journal had %d unreadable records\n", bad);
	return journal_start(err);
}
