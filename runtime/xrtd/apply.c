// SPDX-License-Identifier: MIT
/* Changing values: check, journal, write, read back, publish; revert; transactions; lease. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "xrtd.h"

static uint64_t current_txn; /* journaled with each set of a committing transaction */

/* Write through the backend and read back; on any failure the old value is put back. */
static int write_verified(struct xrtd_knob *k, int64_t value, bool restoring,
			  char err[XRTD_ERR_LEN])
{
	const struct xrtd_backend *b = k->backend;
	char undo_err[XRTD_ERR_LEN];
	int64_t back;
	int ret;

	if (restoring && b->restore)
		ret = b->restore(k, value, err);
	else
		ret = b->write(k, value, err);
	if (!ret) {
		ret = b->read(k, &back, err);
		if (!ret && back != value)
			ret = xrtd_errf(err, EIO,
					"knob %s: wrote %" PRId64 " but read back %" PRId64,
					k->name, value, back);
	}
	if (ret && b->write(k, k->applied, undo_err))
		fprintf(stderr, "xrtd: knob %s: cannot put %" PRId64 " back: %s\n", k->name,
			k->applied, undo_err);
	return ret;
}

int knob_set(struct xrtd_knob *k, int64_t value, const char *reason, const char *via,
	     char err[XRTD_ERR_LEN])
{
	int64_t old = k->applied;
	int ret;

	ret = knob_check(k, value, err);
	if (ret) {
		xrtd.counters.refused++;
		audit_change(k, old, value, "refused", reason, via);
		table_publish(k, XT_KNOB_REFUSED, ERANGE, k->seen_gen);
		return ret;
	}
	if (value == old) {
		table_publish(k, XT_KNOB_APPLIED, 0, k->seen_gen); /* already in effect */
		return 0;
	}
	ret = k->armed ? 0 : journal_arm(k);
	if (!ret) {
		k->armed = true;
		ret = journal_set(k, old, value, current_txn);
	}
	if (ret) { /* nothing may change that the journal does not know about */
		xrtd.counters.failed++;
		table_publish(k, XT_KNOB_FAILED, -ret, k->seen_gen);
		return xrtd_errf(err, -ret, "knob %s: journal write failed (%s): not applied",
				 k->name, strerror(-ret));
	}
	k->kept = false;
	table_publish(k, XT_KNOB_APPLYING, 0,
		      __atomic_load_n(&k->shared->applied_gen, __ATOMIC_RELAXED));
	ret = write_verified(k, value, false, err);
	if (ret) {
		xrtd.counters.failed++;
		audit_change(k, old, value, "failed", reason, via);
		table_publish(k, XT_KNOB_FAILED, -ret, k->seen_gen);
		return ret;
	}
	k->applied = value;
	xrtd.counters.applied++;
	audit_change(k, old, value, "applied", reason, via);
	table_publish(k, XT_KNOB_APPLIED, 0, k->seen_gen);
	return 0;
}

int knob_revert(struct xrtd_knob *k, int64_t value, const char *reason, char err[XRTD_ERR_LEN])
{
	int64_t old = k->applied;
	bool to_original = value == k->original;
	int ret;

	if (!k->armed)
		return 0;
	if (value != old) {
		ret = journal_set(k, old, value, current_txn);
		if (ret)
			return xrtd_errf(err, -ret, "knob %s: journal write failed (%s)", k->name,
					 strerror(-ret));
		ret = write_verified(k, value, to_original, err);
		if (ret) {
			xrtd.counters.failed++;
			audit_change(k, old, value, "restore-failed", reason, "xrtd");
			table_publish(k, XT_KNOB_FAILED, -ret, k->seen_gen);
			return ret;
		}
		k->applied = value;
		xrtd.counters.restored++;
		audit_change(k, old, value, "restored", reason, "xrtd");
	}
	if (to_original) {
		journal_restored(k);
		k->armed = false;
	}
	k->kept = false;
	table_publish(k, XT_KNOB_ROLLED_BACK, 0, k->seen_gen);
	return 0;
}

void knobs_restore_all(const char *reason)
{
	char err[XRTD_ERR_LEN];

	for (int i = XT_KNOB_MAX - 1; i >= 0; i--) {
		struct xrtd_knob *k = xrtd.knobs[i];

		if (k && k->armed && !k->kept && knob_revert(k, k->original, reason, err))
			fprintf(stderr, "xrtd: %s\n", err);
	}
}

void lease_check(void)
{
	char err[XRTD_ERR_LEN];

	if (!xrtd.lease_held || now_ns() < xrtd.lease_deadline_ns)
		return;
	xrtd.lease_held = false;
	xrtd.lease_deadline_ns = 0;
	__atomic_store_n(&xrtd.table->lease_deadline_ns, 0, __ATOMIC_RELEASE);
	xrtd.counters.lease_expiries++;
	for (int i = XT_KNOB_MAX - 1; i >= 0; i--) {
		struct xrtd_knob *k = xrtd.knobs[i];
		int64_t to;

		if (!k || !k->armed || k->kept)
			continue;
		to = xrtd.opt.lease_action == LEASE_TO_GOOD ? k->good : k->original;
		if (knob_revert(k, to, "lease expired", err))
			fprintf(stderr, "xrtd: %s\n", err);
	}
}

int txn_commit(struct txn *t, char err[XRTD_ERR_LEN])
{
	int64_t old[XT_KNOB_MAX];
	char undo_err[XRTD_ERR_LEN];
	int done, ret = 0;

	journal_txn(t->id, "begin");
	current_txn = t->id;
	for (done = 0; done < t->count; done++) {
		struct xrtd_knob *k = xrtd.knobs[t->sets[done].slot];

		if (!k || k->shared->reg_gen != t->sets[done].reg_gen) {
			ret = xrtd_errf(err, ENOENT, "a knob of the transaction was unregistered");
			break;
		}
		old[done] = k->applied;
		ret = knob_set(k, t->sets[done].value, t->sets[done].reason, "txn", err);
		if (ret)
			break;
	}
	if (ret) {
		char msg[XRTD_ERR_LEN];

		for (int j = done - 1; j >= 0; j--) {
			struct xrtd_knob *k = xrtd.knobs[t->sets[j].slot];

			if (knob_revert(k, old[j], "transaction failed", undo_err))
				fprintf(stderr, "xrtd: %s\n", undo_err);
		}
		snprintf(msg, sizeof(msg), "transaction %" PRIu64 " not applied: %s", t->id, err);
		snprintf(err, XRTD_ERR_LEN, "%s", msg);
	}
	current_txn = 0;
	journal_txn(t->id, ret ? "abort" : "commit");
	return ret;
}
