// SPDX-License-Identifier: MIT
/*
 * A value change with engine-owned values. Guarantee: a thread that entered a perf-const's
 * safe span finishes that pass with the value it entered with; the new value is seen from the
 * next entry.
 *
 * A perf-const read once per pass (one span whose trampoline loads its word once) gets this from
 * the store alone: the store and the load are both one aligned 8-byte access, so the pass sees the
 * old or the new value, and it sees it once. The target is not stopped.
 *
 * Any other perf-const (several spans, or several loads in one span) is changed with the world
 * stopped at a moment when no thread is inside the plan's safe spans, its trampolines, or has a
 * return address there (the quiescence of arming). If quiescence is not reached in time, nothing
 * is written and the change is refused.
 */
#include <stdio.h>
#include <string.h>

#include "sie.h"
#include "target.h"

int sie_set_value(struct target *t, const struct sie_plan *p, const struct sie_state *s,
		  const struct sie_opts *o, const char *name, int64_t v, char err[SIE_ERR_LEN])
{
	const struct sie_const *c = NULL;
	int k, rc;

	for (k = 0; k < p->nconsts && !c; k++)
		if (!strcmp(p->consts[k].name, name))
			c = &p->consts[k];
	if (!c) {
		snprintf(err, SIE_ERR_LEN, "refused: %s is not a perf-const of the plan", name);
		return -1;
	}
	if (sie_value_check(c, v, err))
		return -1;
	if (sie_single_read(p, c)) {
		sie_values_store(s, (int)(c - p->consts), v);
		return 0;
	}
	if (t->overflow) {
		snprintf(err, SIE_ERR_LEN,
			 "refused: pid %d created more than %d threads, which the engine cannot "
			 "check for quiescence; the value in effect is unchanged",
			 t->pid, TARGET_MAX_THREADS);
		return -1;
	}
	t->holding = 1;
	if (target_stop(t, 0, err)) {
		t->holding = 0;
		return -1;
	}
	rc = sie_quiesce(t, p, s, o, err);
	if (!rc)
		sie_values_store(s, (int)(c - p->consts), v);
	target_resume(t, 0);
	t->holding = 0;
	return rc;
}
