/* SPDX-License-Identifier: GPL-2.0 */
/*
 * xsie internals shared by the control device (xsie_main.c), the transitions
 * (xsie_transition.c), the critical spans (xsie_span.c), the per-task table (xsie_pertask.c) and
 * the kallsyms resolver (xsie_symbols.c); each calls only the ones listed after it.
 */
#ifndef XSIE_INTERNAL_H
#define XSIE_INTERNAL_H

#include <linux/atomic.h>
#include <linux/kprobes.h>
#include <linux/mutex.h>
#include <linux/workqueue.h>

#include "xtune/xsie.h"

#define XSIE_MAX_SAFE	       4 /* safe spans per const */
#define XSIE_FENTRY_SIZE       5 /* the call (or nop) ftrace patches at a function's entry */
#define XSIE_FENTRY_MAX_OFFSET 4 /* after an endbr64 at most */

struct xsie_const;
struct xsie_safe;

/* The ModRM reg field of `shl|shr|sar $imm8, reg` (C0/C1), as XSIE_UPD_SHIFT spans decode it. */
#define XSIE_SHIFT_SHL 4
#define XSIE_SHIFT_SHR 5
#define XSIE_SHIFT_SAR 7

/* One critical span: a probe before the instruction that consumes the constant's state. */
struct xsie_span {
	struct kprobe kp;
	struct xsie_const *c;
	struct xsie_span_desc d;
	unsigned long func_addr;
	u8 shift_op; /* XSIE_UPD_SHIFT: XSIE_SHIFT_SHL, _SHR or _SAR (decoded from the bytes) */
};

/* A probe at a safe span's entry or exit (global transitions and value flips). */
struct xsie_monitor {
	struct kprobe kp;
	struct xsie_safe *ss;
};

/* One safe span: a whole function, with monitors at its entry and exits during transitions. */
struct xsie_safe {
	struct xsie_const *c;
	char func[XSIE_SYM_LEN];
	unsigned long start, end;
	unsigned long
		entry_addr; /* where the entry probe sits: past the ftrace site (xsie_symbols.c) */
	/* FUNC.cold, the part gcc moved out of line (0: none) */
	unsigned long cold_start, cold_end;
	u32 cond_exit; /* 1 + the offset of an exit that is a conditional jump (0: none) */
	u32 nexits;
	u32 exits[XSIE_MAX_EXITS];
	struct xsie_monitor entry;
	struct xsie_monitor exit_kp[XSIE_MAX_EXITS];
	struct kretprobe rp; /* per-thread mode */
};

/* A transaction: its consts switch together because their handlers test one flag. */
struct xsie_group {
	u32 id;
	u32 mode;
	int active;   /* the new values are in effect (read by handlers) */
	int counting; /* a switch or flip waits: entry/exit probes maintain `inside` */
	atomic_long_t inside;
	atomic_t rp_live; /* per-thread mode: executions whose return a kretprobe still awaits */
	atomic64_t refcount_updates;
	u64 t_start_ns, t_done_ns;
	u32 n;
	struct xsie_const *members[XSIE_TXN_MAX];
	bool in_use;
	bool counters; /* entry/exit probes placed (global switch, value flips) */
	/*
	 * The counters stay placed from arm to disarm: a member reads its value at several spans,
	 * so later values flip. Placing and removing probes at every flip, in functions the load
	 * is inside all the time, crashed the 6.1 guest (a single-step from a NULL slot at an exit
	 * probe); a flip now only turns counting on.
	 */
	bool keep_counters;
	bool monitors; /* kretprobes placed (per-thread mode) */
};

struct xsie_const {
	u32 id;
	u32 state; /* enum xsie_state */
	u32 nspans, nsafe;
	struct xsie_span spans[XSIE_MAX_SPANS];
	struct xsie_safe safe[XSIE_MAX_SAFE];
	struct xsie_group *group;
	s64 min, max;	   /* valid V (struct xsie_range) ... */
	s64 multiple_of;   /* ... a multiple of this (1: any) ... */
	bool power_of_two; /* ... and a power of two if set */
	/*
	 * The V the handlers use. A const with one span reads the value page at each hit (one read
	 * per pass) and keeps the last in-range value here; a const with several spans reads only
	 * this, which changes by a flip when no thread is inside a safe span (XSIE_IOC_SET).
	 */
	s64 in_effect;
	s64 pending;	   /* the V of a flip under way */
	bool flip_pending; /* `pending` becomes `in_effect` at the group's next switch */
	u64 __percpu *hits;
	u64 __percpu *applied;
	u64 __percpu *old_hits;
};

extern struct xsie_value_page *xsie_values;

/* Whether @v is a value @c may take (its range and constraints): cheap enough for a handler. */
static inline bool xsie_value_valid(const struct xsie_const *c, s64 v)
{
	if (v < c->min || v > c->max)
		return false;
	if (c->power_of_two && (v <= 0 || (v & (v - 1))))
		return false;
	return c->multiple_of <= 1 || v % c->multiple_of == 0;
}
extern struct mutex xsie_lock;

/* xsie_symbols.c: the kallsyms resolver */
int xsie_symbols_init(void);
int xsie_func_bounds(const char *func, unsigned long *start, unsigned long *size);
unsigned long xsie_symbol(const char *name);
unsigned long xsie_entry_past_ftrace(unsigned long start);

/* xsie_pertask.c: tasks inside a safe span entered after a per-thread switch */
int xsie_task_in_new_span(struct xsie_group *g);
bool xsie_task_enter(struct xsie_group *g);
void xsie_task_leave(struct xsie_group *g);
void xsie_tasks_forget(struct xsie_group *g);

/* xsie_span.c */
int xsie_span_load(struct xsie_const *c, const struct xsie_span_desc *d);
int xsie_safe_load(struct xsie_const *c, const struct xsie_safe_desc *d);
int xsie_range_load(struct xsie_const *c, const struct xsie_range *r);
int xsie_spans_register(struct xsie_const *c);
void xsie_spans_unregister(struct xsie_const *c);
void xsie_span_counts(struct xsie_const *c, u32 *optimized, u32 *int3);

/* xsie_transition.c */
extern struct xsie_group xsie_groups[XSIE_MAX_CONSTS];
int xsie_group_arm(struct xsie_group *g);
int xsie_value_flip(struct xsie_const *c, s64 v);
void xsie_group_disarm(struct xsie_group *g);
int xsie_transition_init(void);
void xsie_transition_exit(void);

#endif /* XSIE_INTERNAL_H */
