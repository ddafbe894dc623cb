/* SPDX-License-Identifier: MIT */
/* xrtd's state and the operations the control socket, the table watcher and main share. */
#ifndef XRTD_H
#define XRTD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

enum lease_action { LEASE_TO_GOOD, LEASE_TO_ORIGINAL };

struct xrtd_options {
	const char *socket_path;
	const char *state_dir;
	const char *shm_name;
	enum lease_action lease_action;
	unsigned poll_us;      /* idle poll period of the table watcher */
	bool journal_sync_all; /* fdatasync every record, not only the originals */
	int rt_priority;       /* SCHED_FIFO priority of the table watcher, 0 = normal scheduling */
	unsigned slice_us; /* the watcher's scheduler slice under normal scheduling, 0 = default */
};

struct xrtd_counters {
	uint64_t requests, request_errors;
	uint64_t applied, refused, failed, restored, lease_expiries;
};

struct xrtd {
	struct xrtd_options opt;
	struct xt_knob_table_header *table;
	struct xrtd_knob *knobs[XT_KNOB_MAX]; /* by slot */
	int slots_used; /* one past the highest slot ever registered: the watcher scans no further
			 */
	pthread_mutex_t lock; /* knobs, journal, backends, counters */
	struct xrtd_counters counters;
	bool replaying; /* journal replay: restoring originals, the allow-list does not apply */
	bool lease_held;
	uint64_t lease_deadline_ns;
	volatile int stop;
};

extern struct xrtd xrtd;

uint64_t now_ns(void);

/* table.c: the shared knob table. */
int table_create(const char *name);
void table_destroy(const char *name);
struct xt_knob_slot *table_slot(int i);
void table_fill_slot(struct xrtd_knob *k);
void table_publish(struct xrtd_knob *k, uint32_t state, int32_t error, uint64_t gen);
void table_free_slot(int i);

/* knob.c: registration and lookup (lock held). */
struct knob_spec {
	const char *name, *backend, *target, *netns;
	bool has_min, has_max;
	int64_t min, max, step;
	const char *enum_values[XRTD_ENUM_MAX];
	int enum_count;
};
int knob_register(const struct knob_spec *spec, struct xrtd_knob **out, char err[XRTD_ERR_LEN]);
int knob_unregister(struct xrtd_knob *k, char err[XRTD_ERR_LEN]);
struct xrtd_knob *knob_find(const char *name);
/* Is value allowed (bounds, step, enum range)? */
int knob_check(const struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN]);
void knob_free(struct xrtd_knob *k);
/* --allow BACKEND:GLOB; the first rule for a backend replaces its defaults. */
int allow_add(const char *spec, char err[XRTD_ERR_LEN]);

/* apply.c: changing values (lock held). */
int knob_set(struct xrtd_knob *k, int64_t value, const char *reason, const char *via,
	     char err[XRTD_ERR_LEN]);
/* Put `k` back to `value` (original or good), journaled and audited; state ROLLED_BACK. */
int knob_revert(struct xrtd_knob *k, int64_t value, const char *reason, char err[XRTD_ERR_LEN]);
/* Restore every armed, non-kept knob to its original (exit path). */
void knobs_restore_all(const char *reason);
void lease_check(void);

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

/* journal.c: append-only, fdatasync'd before the change it announces. */
int journal_open(const char *state_dir, char err[XRTD_ERR_LEN]);
void journal_close(void);
int journal_arm(const struct xrtd_knob *k);
int journal_set(const struct xrtd_knob *k, int64_t old, int64_t value, uint64_t txn);
int journal_restored(const struct xrtd_knob *k);
int journal_keep(const struct xrtd_knob *k);
int journal_txn(uint64_t txn, const char *what);
const char *journal_path(void);

/* audit.c: one line per change with the reason. */
int audit_open(const char *state_dir, char err[XRTD_ERR_LEN]);
void audit_change(const struct xrtd_knob *k, int64_t old, int64_t value, const char *outcome,
		  const char *reason, const char *via);
const char *audit_path(void);

/* watcher.c: applies desired values written into the shared table. */
int watcher_start(void);
void watcher_stop(void);

/* control.c: the control socket. */
int control_listen(const char *path, char err[XRTD_ERR_LEN]);
int control_run(void);
void control_close(void);

#endif /* XRTD_H */
