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
/* Restore the original (unless kept), then unregister. */
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

/* lease.c: the tuner's lease; on expiry armed knobs go back to good (or original) values. */
enum lease_action { LEASE_TO_GOOD, LEASE_TO_ORIGINAL };
void lease_set_action(enum lease_action action);
const char *lease_action_name(void);
void lease_grant(uint64_t ms);
void lease_release(void);
/* Held? And how many ms are left (negative when overdue). */
bool lease_held(int64_t *remaining_ms);
void lease_check(void);

/* recovery.c: put back what the journal of a crashed run left armed, then start a new journal. */
int recovery_run(const char *state_dir, bool journal_sync_all, char err[XRTD_ERR_LEN]);

#endif /* XRTD_APPLY_H */
