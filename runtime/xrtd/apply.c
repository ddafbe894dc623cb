// SPDX-License-Identifier: MIT
/* Changing values: check, journal, write, read back, publish; revert; restore on exit. */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "apply.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t current_txn; /* journaled with each set of a committing transaction */
struct xrtd_counters xrtd_counters;

void apply_lock(void)
{
	pthread_mutex_lock(&lock);
}

void apply_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

void apply_in_txn(uint64_t txn)
{
	current_txn = txn;
}

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

/*
 * After `k` was written with `value`, every other knob of a coupled backend must still read its
 * applied value: the kernel keeps some targets together (backend.h). One that moved is written
 * back and audited with the knob whose write moved it; when that write fails, or moves `k` off
 * `value` again, the two values cannot be in force together and the error names both (the caller
 * puts `k` back). A knob that cannot be read now (its namespace gone) is left to its own writes.
 */
static int others_hold(struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	char why[XRTD_ERR_LEN], reason[XT_KNOB_NAME_LEN + 32];
	int64_t now;

	if (!k->backend->coupled)
		return 0;
	snprintf(reason, sizeof(reason), "moved by a write of %s", k->name);
	for (int i = 0; i < knob_slots_used(); i++) {
		struct xrtd_knob *o = knob_at(i);

		if (!o || o == k || o->backend != k->backend || o->backend->read(o, &now, why) ||
		    now == o->applied)
			continue;
		audit_change(o, now, o->applied, "held", reason, "xrtd");
		if (write_verified(o, o->applied, false, why))
			return xrtd_errf(err, EIO,
					 "knob %s: writing %" PRId64 " moved knob %s from %" PRId64
					 " to %" PRId64 ", which cannot be put back: %s",
					 k->name, value, o->name, o->applied, now, why);
		if (k->backend->read(k, &now, why) || now != value)
			return xrtd_errf(
				err, EIO,
				"knobs %s = %" PRId64 " and %s = %" PRId64
				" cannot hold together: the kernel couples them, and writing "
				"either moves the other",
				k->name, value, o->name, o->applied);
	}
	return 0;
}

/* Put `k` back to `old` after a write whose effect on other knobs was refused. */
static void unwrite(struct xrtd_knob *k, int64_t old)
{
	char err[XRTD_ERR_LEN];

	if (k->backend->write(k, old, err) || others_hold(k, old, err))
		fprintf(stderr, "xrtd: knob %s: putting %" PRId64 " back: %s\n", k->name, old, err);
}

int knob_set(struct xrtd_knob *k, int64_t value, const char *reason, const char *via,
	     char err[XRTD_ERR_LEN])
{
	int64_t old = k->applied;
	int ret;

	ret = knob_check(k, value, err);
	if (ret) {
		xrtd_counters.refused++;
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
		xrtd_counters.failed++;
		table_publish(k, XT_KNOB_FAILED, -ret, k->seen_gen);
		return xrtd_errf(err, -ret, "knob %s: journal write failed (%s): not applied",
				 k->name, strerror(-ret));
	}
	k->kept = false;
	table_publish(k, XT_KNOB_APPLYING, 0,
		      __atomic_load_n(&k->shared->applied_gen, __ATOMIC_RELAXED));
	ret = write_verified(k, value, false, err);
	if (!ret) {
		ret = others_hold(k, value, err);
		if (ret)
			unwrite(k, old);
	}
	if (ret) {
		xrtd_counters.failed++;
		audit_change(k, old, value, "failed", reason, via);
		table_publish(k, XT_KNOB_FAILED, -ret, k->seen_gen);
		return ret;
	}
	k->applied = value;
	xrtd_counters.applied++;
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
			xrtd_counters.failed++;
			audit_change(k, old, value, "restore-failed", reason, "xrtd");
			table_publish(k, XT_KNOB_FAILED, -ret, k->seen_gen);
			return ret;
		}
		k->applied = value;
		xrtd_counters.restored++;
		audit_change(k, old, value, "restored", reason, "xrtd");
		/* `k` is back; a coupled knob that cannot be held is the next revert's to restore
		 */
		if (others_hold(k, value, err))
			fprintf(stderr, "xrtd: %s\n", err);
	}
	if (to_original) {
		journal_restored(k);
		k->armed = false;
	}
	k->kept = false;
	table_publish(k, XT_KNOB_ROLLED_BACK, 0, k->seen_gen);
	return 0;
}

int knob_add(const struct knob_spec *spec, struct xrtd_knob **out, char err[XRTD_ERR_LEN])
{
	struct xrtd_knob *k = knob_find(spec->name);
	int ret;

	if (k && knob_matches(k, spec)) { /* a tuner registering again, e.g. after a restart */
		*out = k;
		return 0;
	}
	ret = knob_register(spec, &k, err);
	if (ret)
		return ret;
	ret = journal_register(k);
	if (ret) {
		knob_unregister(k);
		return xrtd_errf(err, -ret, "register %s: journal write failed (%s)", spec->name,
				 strerror(-ret));
	}
	*out = k;
	return 0;
}

int knob_remove(struct xrtd_knob *k, const char *reason, char err[XRTD_ERR_LEN])
{
	int ret = 0;

	if (k->armed && !k->kept)
		ret = knob_revert(k, k->original, reason, err);
	if (ret)
		return ret;
	ret = journal_unregister(k);
	if (ret) /* still registered, as the journal says: a restarted xrtd would register it */
		return xrtd_errf(err, -ret, "unregister %s: journal write failed (%s)", k->name,
				 strerror(-ret));
	knob_unregister(k);
	return 0;
}

void knobs_restore_all(const char *reason)
{
	char err[XRTD_ERR_LEN];

	for (int i = XT_KNOB_MAX - 1; i >= 0; i--) {
		struct xrtd_knob *k = knob_at(i);

		if (k && k->armed && !k->kept && knob_revert(k, k->original, reason, err))
			fprintf(stderr, "xrtd: %s\n", err);
	}
}
