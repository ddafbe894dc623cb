/* SPDX-License-Identifier: MIT */
/*
 * The backend interface of xrtd: how a knob's value reaches the system.
 *
 * One backend per file (backend_<name>.c), registered by one line in that file:
 *
 *	XRTD_BACKEND(backend_sysfs);
 *
 * The Makefile builds every backend_*.c, and the macro puts a pointer into the `xrtd_backends`
 * section, so adding a backend touches no other file.
 *
 * xrtd owns everything around the backend: bounds/enum/step checks, the journal (written and
 * fsync'd before write() is called), reading back after write(), publishing `applied` in the
 * shared table, rollback and restore. A backend only moves values between the knob and the system.
 * All calls are made with xrtd's apply lock held, from one thread at a time.
 */
#ifndef XRTD_BACKEND_H
#define XRTD_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"
#include "xtune/knob.h"

#define XRTD_NETNS_LEN	256
#define XRTD_ENUM_MAX	16
#define XRTD_ENUM_LEN	32
#define XRTD_CLIENT_LEN 64 /* a client's name (hello), "" for the anonymous client */

struct xrtd_knob {
	int slot;			 /* index in the shared table */
	struct xt_knob_slot *shared;	 /* that slot (SIE engines read `applied` from it) */
	char name[XT_KNOB_NAME_LEN];	 /* unique per xrtd */
	char target[XT_KNOB_TARGET_LEN]; /* backend-specific: sysctl key, sysfs path, map:field */
	char netns[XRTD_NETNS_LEN];	 /* sysctl: network namespace file, "" = xrtd's own */
	const struct xrtd_backend *backend;
	uint32_t type; /* enum xt_knob_type */
	int64_t min, max, step;
	char enum_values[XRTD_ENUM_MAX][XRTD_ENUM_LEN]; /* XT_KNOB_ENUM: value = index */
	int enum_count;
	int64_t original;  /* found on the system at registration (or replayed from the journal) */
	int64_t applied;   /* what the system runs with now */
	int64_t good;	   /* last known-good value (lease expiry target) */
	bool armed;	   /* journaled as changed: must be restored on exit */
	bool kept;	   /* told to keep its value on exit */
	uint64_t seen_gen; /* the shared slot desired_gen last acted on */
	char client[XRTD_CLIENT_LEN]; /* whose lease covers it: who last registered or set it */
	void *priv;		      /* backend state, set by validate(), freed by release() */
};

struct xrtd_backend {
	const char *name; /* as spelled in the control protocol and the journal */
	enum xt_backend id;
	/*
	 * Check the knob's target (syntax, allow-list, existence, namespace) and set up k->priv.
	 * For enum knobs the backend may fill k->enum_values when none were given.
	 * Must not change the system.
	 */
	int (*validate)(struct xrtd_knob *k, char err[XRTD_ERR_LEN]);
	/*
	 * Refuse a value within the knob's bounds that the target still cannot take (an SIE
	 * plan's analyzed range and constraints), before the journal. NULL: the bounds suffice.
	 */
	int (*check)(const struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN]);
	/* Read the value the system runs with now. */
	int (*read)(struct xrtd_knob *k, int64_t *value, char err[XRTD_ERR_LEN]);
	/* Make the system run with `value` (already checked against the knob's bounds). */
	int (*write)(struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN]);
	/* Put the original back (exit, rollback, lease expiry, crash replay). NULL: use write. */
	int (*restore)(struct xrtd_knob *k, int64_t original, char err[XRTD_ERR_LEN]);
	/* Free k->priv. NULL: nothing to free. */
	void (*release)(struct xrtd_knob *k);
	/*
	 * The kernel keeps some of its targets together, so a write can move another knob of this
	 * backend (a block queue's max_sectors_kb recomputes its read_ahead_kb; vm.dirty_bytes
	 * zeroes vm.dirty_ratio): xrtd reads the others back after each write (apply.c).
	 */
	bool coupled;
};

#define XRTD_BACKEND(b)                                                                            \
	static const struct xrtd_backend *const xrtd_backend_ptr_##b                               \
		__attribute__((used, section("xrtd_backends"))) = &(b)

/* backend.c: lookup by protocol name; NULL when unknown. */
const struct xrtd_backend *xrtd_backend_by_name(const char *name);

/* The directory where backends keep files of their own (xrtd's --state-dir, set by main). */
void backend_set_state_dir(const char *dir);
const char *backend_state_dir(void);
/* table.c: the shared table's name under /dev/shm (SIE engines map it). */
const char *table_name(void);

/* knob_text.c: text as found in a file → knob value: integer, or index of an enum value ("[x]"
 * selects x). */
int xrtd_knob_parse(const struct xrtd_knob *k, const char *text, int64_t *value,
		    char err[XRTD_ERR_LEN]);
/* Knob value → text to write into a file. */
int xrtd_knob_format(const struct xrtd_knob *k, int64_t value, char *buf, size_t len);
/* allow.c: is `subject` allowed by the --allow patterns given for `backend` (fnmatch globs)? */
bool xrtd_allowed(const char *backend, const char *subject);

#endif /* XRTD_BACKEND_H */
