/* SPDX-License-Identifier: MIT */
/*
 * The second layer of xrtd: what exists and what happened. The shared table, the knob registry,
 * the allow-list, journal records and the audit log (and the backends, in backend.h). Nothing
 * here changes a knob's value: that is apply.h.
 */
#ifndef XRTD_REGISTRY_H
#define XRTD_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* table.c: the shared knob table. */
int table_create(const char *name);
void table_destroy(void);
struct xt_knob_slot *table_slot(int i);
void table_fill_slot(struct xrtd_knob *k);
void table_publish(struct xrtd_knob *k, uint32_t state, int32_t error, uint64_t gen);
void table_free_slot(int i);
void table_set_lease_deadline(uint64_t ns);
/* The word a tuner rings (FUTEX_WAKE) after writing desired values. */
uint32_t *table_doorbell(void);

/* knob.c: registration and lookup (apply lock held). */
struct knob_spec {
	const char *name, *backend, *target, *netns;
	bool has_min, has_max;
	int64_t min, max, step;
	const char *enum_values[XRTD_ENUM_MAX];
	int enum_count;
	bool has_slot; /* a restarted xrtd puts each knob back in its slot */
	int slot;
};
int knob_register(const struct knob_spec *spec, struct xrtd_knob **out, char err[XRTD_ERR_LEN]);
/* `client` owns the knob now: its lease covers it. */
void knob_own(struct xrtd_knob *k, const char *client);
/* Is `k` what `spec` registers (backend, target, netns, bounds or enum values)? */
bool knob_matches(const struct xrtd_knob *k, const struct knob_spec *spec);
/* 1..size-1 characters of [A-Za-z0-9_.:-]: knob and client names. */
bool xrtd_name_valid(const char *s, size_t size);
/* Free the knob and its slot; its value is left as it is (apply.c's knob_remove restores it). */
void knob_unregister(struct xrtd_knob *k);
struct xrtd_knob *knob_find(const char *name);
/* The knob in `slot`, NULL when free. */
struct xrtd_knob *knob_at(int slot);
/* One past the highest slot ever registered: the watcher scans no further. */
int knob_slots_used(void);
int knob_count(void);
/* Is value allowed (bounds, step, enum range)? */
int knob_check(const struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN]);
void knob_free(struct xrtd_knob *k);
void knobs_free_all(void);

/* allow.c: --allow BACKEND:GLOB; the first rule for a backend replaces its defaults. */
int allow_add(const char *spec, char err[XRTD_ERR_LEN]);
/* While journaled originals are put back, every target is allowed. */
void allow_replaying(bool on);

/* knob_json.c: the knob's backend, target, netns, type and enum values as JSON fields, each after a
 * comma (the journal's records and the control replies). */
struct jbuf;
void knob_json_fields(struct jbuf *b, const struct xrtd_knob *k);

/* journal.c: append-only, fdatasync'd before the change it announces. */
void journal_init(const char *state_dir, bool sync_all);
/* One knob as the journal left it. */
struct journal_knob {
	struct xrtd_knob k; /* identity, original (arm), bounds and slot (register) */
	bool armed;	    /* changed, neither restored nor kept: replay restores it */
	bool registered;    /* registered, not unregistered: a restarted xrtd registers it again */
};
/* The knobs of the journal (*out, free()d by the caller); returns how many records were bad. */
int journal_read(struct journal_knob **out, int *count, char err[XRTD_ERR_LEN]);
/* Begin a fresh journal holding the knobs registered now, and open it for appending. */
int journal_start(char err[XRTD_ERR_LEN]);
void journal_close(void);
int journal_register(const struct xrtd_knob *k);
int journal_unregister(const struct xrtd_knob *k);
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
/* A registration event (restored or dropped at start) and why. */
void audit_registration(const struct xrtd_knob *k, const char *outcome, const char *reason);
const char *audit_path(void);

#endif /* XRTD_REGISTRY_H */
