// SPDX-License-Identifier: GPL-2.0
/*
 * The per-task table of per-thread transitions: which tasks run a safe-span execution they
 * entered after their transaction switched. The kretprobes of the safe spans (xsie_transition.c)
 * enter and leave it; the critical-span handlers (xsie_span.c) ask it.
 */
#include <linux/sched.h>
#include <linux/spinlock.h>

#include "xsie_internal.h"

/* Per-thread mode: which tasks are inside a safe-span execution entered after the switch. */
#define XSIE_TASKS 512
struct xsie_task_slot {
	struct task_struct *task;
	struct xsie_group *g;
	int depth;
};
static struct xsie_task_slot xsie_tasks[XSIE_TASKS];
static DEFINE_RAW_SPINLOCK(xsie_tasks_lock);

static struct xsie_task_slot *xsie_task_find(struct xsie_group *g, bool create)
{
	struct xsie_task_slot *free = NULL;
	int i;

	for (i = 0; i < XSIE_TASKS; i++) {
		if (xsie_tasks[i].task == current && xsie_tasks[i].g == g)
			return &xsie_tasks[i];
		if (!free && !xsie_tasks[i].task)
			free = &xsie_tasks[i];
	}
	if (create && free) {
		free->task = current;
		free->g = g;
		free->depth = 0;
		return free;
	}
	return NULL;
}

/**
 * xsie_task_in_new_span - does current run a safe span it entered after @g switched?
 * @g: a per-thread transaction
 *
 * Called from the critical-span handler (preemption off).
 */
int xsie_task_in_new_span(struct xsie_group *g)
{
	struct xsie_task_slot *t;
	unsigned long flags;
	int in;

	raw_spin_lock_irqsave(&xsie_tasks_lock, flags);
	t = xsie_task_find(g, false);
	in = t && t->depth > 0;
	raw_spin_unlock_irqrestore(&xsie_tasks_lock, flags);
	return in;
}

/**
 * xsie_task_enter - current enters a safe-span execution of @g after the switch
 * @g: a per-thread transaction
 *
 * Return: false when the table is full (the execution keeps the old values).
 */
bool xsie_task_enter(struct xsie_group *g)
{
	struct xsie_task_slot *t;
	unsigned long flags;

	raw_spin_lock_irqsave(&xsie_tasks_lock, flags);
	t = xsie_task_find(g, true);
	if (t)
		t->depth++;
	raw_spin_unlock_irqrestore(&xsie_tasks_lock, flags);
	return t;
}

/* xsie_task_leave - current returns from a safe-span execution of @g it entered */
void xsie_task_leave(struct xsie_group *g)
{
	struct xsie_task_slot *t;
	unsigned long flags;

	raw_spin_lock_irqsave(&xsie_tasks_lock, flags);
	t = xsie_task_find(g, false);
	if (t && --t->depth <= 0)
		t->task = NULL;
	raw_spin_unlock_irqrestore(&xsie_tasks_lock, flags);
}

/* xsie_tasks_forget - drop every entry of @g (its monitors are gone) */
void xsie_tasks_forget(struct xsie_group *g)
{
	unsigned long flags;
	int i;

	raw_spin_lock_irqsave(&xsie_tasks_lock, flags);
	for (i = 0; i < XSIE_TASKS; i++)
		if (xsie_tasks[i].g == g)
			xsie_tasks[i].task = NULL;
	raw_spin_unlock_irqrestore(&xsie_tasks_lock, flags);
}
