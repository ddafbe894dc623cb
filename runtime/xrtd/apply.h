/* SPDX-License-Identifier: MIT */
/*
 * The third layer of xrtd: changing values. Set, revert, transactions, the lease and crash
 * recovery, each journaled and audited through registry.h. Callers hold the apply lock.
 */
#ifndef XRTD_APPLY_H
#define XRTD_APPLY_H

#include <stdbool.h>
#include <stdint.h>

#include "registry.h"

/* apply.c: the apply lock guards knobs, journal, backends and counters. */
void apply_lock(void);
void apply_unlock(void);

struct xrtd_counters {
	uint64_t requests, request_errors;
	uint64_t applied, refused, failed, restored, lease_expiries;
};
extern struct xrtd_counters xrtd_counters;

int knob_set(struct xrtd_knob *k, int64_t value, const char *reason, const char *via,
	     char err[XRTD_ERR_LEN]);
/* Put `k` back to `value` (original or good), journaled and audited; state ROLLED_BACK. */
int knob_revert(struct xrtd_knob *k, int64_t value, const char *reason, char err[XRTD_ERR_LEN]);
/* Register and journal; a knob registered the same way already is returned as it is. */
int knob_add(const struct knob_spec *spec, struct xrtd_knob **out, char err[XRTD_ERR_LEN]);
/* Restore the original (unless kept), journal, then unregister. */
int knob_remove(struct xrtd_knob *k, const char *reason, char err[XRTD_ERR_LEN]);
/* Restore every armed, non-kept knob to its original (exit path). */
void knobs_restore_all(const char *reason);
/* The transaction journaled with each set and revert, 0 for none (txn.c). */
void apply_in_txn(uint64_t txn);

/* txn.c: transactions, queued by a client and applied all or nothing. */
struct txn_set {
	int slot;
	uint64_t reg_gen; /* the slot's registration when queued: a re-registered slot is not it */
	int64_t value;
	char reason[128];
};
struct txn {
	uint64_t id; /* 0: none open */
	int count;
	struct txn_set sets[XT_KNOB_MAX];
};
int txn_commit(struct txn *t, char err[XRTD_ERR_LEN]);

/* lease.c: one lease per client; on expiry the armed knobs it owns go back to good or original. */
#define LEASE_MAX 64
enum lease_action { LEASE_TO_GOOD, LEASE_TO_ORIGINAL };
struct lease {
	char client[XRTD_CLIENT_LEN]; /* "" = the anonymous client */
	bool held;
	uint64_t deadline_ns;
	uint64_t expiries;
};
void lease_set_action(enum lease_action action);
const char *lease_action_name(void);
/* Grant or extend `client`'s lease by ms. */
int lease_grant(const char *client, uint64_t ms, char err[XRTD_ERR_LEN]);
void lease_release(const char *client);
/* The lease of `client` (NULL: it never held one); the i-th lease (NULL past the last). */
const struct lease *lease_of(const char *client);
const struct lease *lease_at(int i);
/* How many ms are left (negative when overdue, 0 when not held). */
int64_t lease_remaining_ms(const struct lease *l);
void lease_check(void);

/*
 * recovery.c: put back what the journal of the last run left armed, register its knobs again
 * (those whose target is gone are dropped, audited), then start a new journal. Needs the table.
 */
int recovery_run(const char *state_dir, bool journal_sync_all, char err[XRTD_ERR_LEN]);

#endif /* XRTD_APPLY_H */
