// SPDX-License-Identifier: GPL-2.0
/*
 * Transitions (KernelX §3.5): when a transaction's new values start to apply.
 *
 *  - immediate: at once;
 *  - per-thread: a thread uses the new values inside safe-span executions it entered after the
 *    switch; executions already running finish with the old values (kretprobes track entries);
 *  - global: one stop_machine() counts the frames of every thread inside a safe span (reliable
 *    unwinder; tried again while some stack is not reliable, refused after that); entry and
 *    exit probes then keep that count, and the exit that brings it to zero switches all consts of
 *    the transaction (self-converging reference count). The monitors are removed afterwards.
 */
#define pr_fmt(fmt) "xsie: " fmt

#include <linux/delay.h>
#include <linux/kprobes.h>
#include <linux/rcupdate.h>
#include <linux/sched/signal.h>
#include <linux/sched/task_stack.h>
#include <linux/spinlock.h>
#include <linux/stop_machine.h>
#include <linux/timekeeping.h>

#include "xsie_internal.h"

struct xsie_group xsie_groups[XSIE_MAX_CONSTS];

/* Disarming returns only once the optimizer has put the original bytes back. */
static void (*xsie_wait_optimizer)(void);
static int (*xsie_stack_save_reliable)(struct task_struct *task, unsigned long *store,
				       unsigned int size);

/* Removes the monitors of completed global transitions (cannot be done from a handler). */
static void xsie_monitors_reap(struct work_struct *work);
static DECLARE_WORK(xsie_reap_work, xsie_monitors_reap);

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

static struct xsie_group *xsie_rp_group(struct kretprobe_instance *ri)
{
	return container_of(get_kretprobe(ri), struct xsie_safe, rp)->c->group;
}

static int xsie_rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct xsie_group *g = xsie_rp_group(ri);
	struct xsie_task_slot *t;
	unsigned long flags;

	if (!READ_ONCE(g->active))
		return 1; /* entered before the switch: this execution keeps the old values */
	raw_spin_lock_irqsave(&xsie_tasks_lock, flags);
	t = xsie_task_find(g, true);
	if (t)
		t->depth++;
	raw_spin_unlock_irqrestore(&xsie_tasks_lock, flags);
	if (!t)
		return 1; /* table full: this execution keeps the old values */
	/* A per-thread transition is complete when the first thread has switched. */
	if (!READ_ONCE(g->t_done_ns))
		cmpxchg(&g->t_done_ns, 0, ktime_get_ns());
	return 0;
}

static int xsie_rp_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct xsie_group *g = xsie_rp_group(ri);
	struct xsie_task_slot *t;
	unsigned long flags;

	raw_spin_lock_irqsave(&xsie_tasks_lock, flags);
	t = xsie_task_find(g, false);
	if (t && --t->depth <= 0)
		t->task = NULL;
	raw_spin_unlock_irqrestore(&xsie_tasks_lock, flags);
	return 0;
}

static void xsie_tasks_forget(struct xsie_group *g)
{
	unsigned long flags;
	int i;

	raw_spin_lock_irqsave(&xsie_tasks_lock, flags);
	for (i = 0; i < XSIE_TASKS; i++)
		if (xsie_tasks[i].g == g)
			xsie_tasks[i].task = NULL;
	raw_spin_unlock_irqrestore(&xsie_tasks_lock, flags);
}

static void xsie_group_activate(struct xsie_group *g)
{
	if (cmpxchg(&g->counting, 1, 0) != 1)
		return;
	g->t_done_ns = ktime_get_ns();
	smp_wmb(); /* the completion time is visible before the switch */
	WRITE_ONCE(g->active, 1);
	schedule_work(&xsie_reap_work);
}

static int xsie_entry_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct xsie_group *g = container_of(p, struct xsie_monitor, kp)->ss->c->group;

	if (READ_ONCE(g->counting)) {
		atomic_long_inc(&g->inside);
		atomic64_inc(&g->refcount_updates);
	}
	return 0;
}

static int xsie_exit_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct xsie_group *g = container_of(p, struct xsie_monitor, kp)->ss->c->group;

	if (READ_ONCE(g->counting)) {
		atomic64_inc(&g->refcount_updates);
		if (atomic_long_dec_return(&g->inside) <= 0)
			xsie_group_activate(g);
	}
	return 0;
}

#define xsie_for_each_safe(g, i, j, ss)                                                            \
	for (i = 0; i < (g)->n; i++)                                                               \
		for (j = 0; j < (g)->members[i]->nsafe && ((ss) = &(g)->members[i]->safe[j]); j++)

static void xsie_safe_unplace(struct xsie_group *g, struct xsie_safe *ss);

static void xsie_monitors_unregister(struct xsie_group *g)
{
	struct xsie_safe *ss;
	u32 i, j;

	if (!g->monitors)
		return;
	xsie_for_each_safe(g, i, j, ss) xsie_safe_unplace(g, ss);
	g->monitors = false;
	xsie_tasks_forget(g);
}

static int xsie_monitor_place(struct xsie_monitor *m, struct xsie_safe *ss, u32 off,
			      kprobe_pre_handler_t handler)
{
	int ret;

	memset(m, 0, sizeof(*m));
	m->ss = ss;
	m->kp.addr = (kprobe_opcode_t *)(ss->start + off);
	m->kp.pre_handler = handler;
	ret = register_kprobe(&m->kp);
	if (ret)
		pr_warn("monitor at %s+%#x refused (%d)\n", ss->func, off, ret);
	return ret;
}

static void xsie_safe_unplace(struct xsie_group *g, struct xsie_safe *ss)
{
	u32 k;

	if (g->mode == XSIE_MODE_PER_THREAD) {
		unregister_kretprobe(&ss->rp);
		return;
	}
	unregister_kprobe(&ss->entry.kp);
	for (k = 0; k < ss->nexits; k++)
		unregister_kprobe(&ss->exit_kp[k].kp);
}

/* Entry/exit probes (global) or a kretprobe (per-thread) on one safe span; all or nothing. */
static int xsie_safe_place(struct xsie_group *g, struct xsie_safe *ss)
{
	u32 k;
	int ret;

	if (g->mode == XSIE_MODE_PER_THREAD) {
		memset(&ss->rp, 0, sizeof(ss->rp));
		ss->rp.kp.addr = (kprobe_opcode_t *)ss->start;
		ss->rp.entry_handler = xsie_rp_entry;
		ss->rp.handler = xsie_rp_return;
		ss->rp.maxactive = 128;
		ret = register_kretprobe(&ss->rp);
		if (ret)
			pr_warn("kretprobe on %s refused (%d)\n", ss->func, ret);
		return ret;
	}
	ret = xsie_monitor_place(&ss->entry, ss, 0, xsie_entry_pre);
	if (ret)
		return ret;
	for (k = 0; k < ss->nexits; k++) {
		ret = xsie_monitor_place(&ss->exit_kp[k], ss, ss->exits[k], xsie_exit_pre);
		if (ret) {
			while (k--)
				unregister_kprobe(&ss->exit_kp[k].kp);
			unregister_kprobe(&ss->entry.kp);
			return ret;
		}
	}
	return 0;
}

static int xsie_monitors_register(struct xsie_group *g)
{
	struct xsie_safe *ss;
	u32 i, j, placed = 0;
	int ret = 0;

	xsie_for_each_safe(g, i, j, ss)
	{
		ret = xsie_safe_place(g, ss);
		if (ret)
			goto undo;
		placed++;
	}
	g->monitors = true;
	return 0;
undo:
	xsie_for_each_safe(g, i, j, ss)
	{
		if (!placed)
			return ret;
		xsie_safe_unplace(g, ss);
		placed--;
	}
	return ret;
}

/* Is @addr inside a safe span of @g? A function's first byte is not: its entry probe counts. */
/* A return address inside [start, end) (never start itself: it follows a call). */
static bool xsie_in_range(unsigned long addr, unsigned long start, unsigned long end)
{
	return addr > start && addr < end;
}

static bool xsie_in_safe(struct xsie_group *g, unsigned long addr)
{
	struct xsie_safe *ss;
	u32 i, j;

	xsie_for_each_safe(g, i, j, ss)
	{
		if (xsie_in_range(addr, ss->start, ss->end) ||
		    xsie_in_range(addr, ss->cold_start, ss->cold_end))
			return true;
	}
	return false;
}

#define XSIE_STACK_DEPTH 128
static unsigned long xsie_stack[XSIE_STACK_DEPTH];

#define XSIE_COUNT_TRIES 10
static pid_t xsie_unreliable_pid; /* the last task whose stack could not be read reliably */

/*
 * stop_machine() callback: every other CPU spins, so no thread moves while stacks are read. The
 * tasks on a CPU now are the stopper threads running this; every other stack is read with the
 * reliable unwinder (as livepatch does). Return: 0, or -EAGAIN when a stack was not reliable
 * (e.g. a task interrupted mid-function): the caller tries again a little later.
 */
static int xsie_count_inside(void *data)
{
	struct xsie_group *g = data;
	struct task_struct *p, *t;
	long inside = 0;
	int n, i;

	rcu_read_lock();
	for_each_process_thread(p, t)
	{
		if (READ_ONCE(t->on_cpu))
			continue;
		n = xsie_stack_save_reliable(t, xsie_stack, XSIE_STACK_DEPTH);
		if (n < 0 || n == XSIE_STACK_DEPTH) {
			xsie_unreliable_pid = t->pid;
			rcu_read_unlock();
			return -EAGAIN;
		}
		for (i = 0; i < n; i++)
			if (xsie_in_safe(g, xsie_stack[i]))
				inside++;
	}
	rcu_read_unlock();
	atomic_long_set(&g->inside, inside);
	if (inside) {
		WRITE_ONCE(g->counting, 1);
	} else {
		g->t_done_ns = ktime_get_ns();
		WRITE_ONCE(g->active, 1);
	}
	return 0;
}

static void xsie_members_unregister(struct xsie_group *g, u32 n)
{
	while (n--)
		xsie_spans_unregister(g->members[n]);
}

/**
 * xsie_group_arm - place the probes of every const of @g and start its transition
 * @g: the transaction, members loaded and not armed
 *
 * Return: 0 (the transition is complete or under way; see status), or a kprobe error with
 * nothing placed.
 */
int xsie_group_arm(struct xsie_group *g)
{
	u32 i;
	int ret;

	g->active = 0;
	g->counting = 0;
	g->t_done_ns = 0;
	atomic_long_set(&g->inside, 0);
	atomic64_set(&g->refcount_updates, 0);
	for (i = 0; i < g->n; i++) {
		g->members[i]->group = g;
		ret = xsie_spans_register(g->members[i]);
		if (ret)
			goto undo_spans;
	}
	for (i = 0; i < g->n; i++)
		g->members[i]->state = XSIE_TRANSITION;
	if (g->mode != XSIE_MODE_IMMEDIATE) {
		ret = xsie_monitors_register(g);
		if (ret)
			goto undo_all;
	}
	/* The transition starts once every probe is in place. */
	g->t_start_ns = ktime_get_ns();
	switch (g->mode) {
	case XSIE_MODE_IMMEDIATE:
		g->t_done_ns = ktime_get_ns();
		WRITE_ONCE(g->active, 1);
		break;
	case XSIE_MODE_PER_THREAD:
		WRITE_ONCE(g->active, 1);
		break;
	case XSIE_MODE_GLOBAL:
		for (i = 0; i < XSIE_COUNT_TRIES; i++) {
			ret = stop_machine(xsie_count_inside, g, NULL);
			if (ret != -EAGAIN)
				break;
			msleep(20);
		}
		if (ret) {
			pr_warn("global transition refused: the stack of task %d is not reliable "
				"after %d tries\n",
				xsie_unreliable_pid, XSIE_COUNT_TRIES);
			xsie_monitors_unregister(g);
			goto undo_all;
		}
		if (READ_ONCE(g->active))
			xsie_monitors_unregister(g);
		break;
	}
	return 0;
undo_all:
	i = g->n;
undo_spans:
	xsie_members_unregister(g, i);
	for (i = 0; i < g->n; i++) {
		g->members[i]->group = NULL;
		g->members[i]->state = XSIE_LOADED;
	}
	return ret;
}

/**
 * xsie_group_disarm - back to the compiled-in values: remove every probe of @g, in order
 * @g: an armed transaction (caller holds xsie_lock)
 */
void xsie_group_disarm(struct xsie_group *g)
{
	u32 i;

	WRITE_ONCE(g->active, 0);
	WRITE_ONCE(g->counting, 0);
	xsie_monitors_unregister(g);
	xsie_members_unregister(g, g->n);
	xsie_wait_optimizer();
	for (i = 0; i < g->n; i++) {
		g->members[i]->group = NULL;
		g->members[i]->state = XSIE_LOADED;
	}
	g->in_use = false;
}

static void xsie_monitors_reap(struct work_struct *work)
{
	int i;

	mutex_lock(&xsie_lock);
	for (i = 0; i < XSIE_MAX_CONSTS; i++) {
		struct xsie_group *g = &xsie_groups[i];

		if (g->in_use && g->mode == XSIE_MODE_GLOBAL && READ_ONCE(g->active))
			xsie_monitors_unregister(g);
	}
	mutex_unlock(&xsie_lock);
}

int xsie_transition_init(void)
{
	int i;

	xsie_stack_save_reliable = (void *)xsie_symbol("stack_trace_save_tsk_reliable");
	xsie_wait_optimizer = (void *)xsie_symbol("wait_for_kprobe_optimizer");
	if (!xsie_stack_save_reliable || !xsie_wait_optimizer) {
		pr_err("cannot locate stack_trace_save_tsk_reliable or "
		       "wait_for_kprobe_optimizer\n");
		return -ENOENT;
	}
	for (i = 0; i < XSIE_MAX_CONSTS; i++)
		xsie_groups[i].id = i + 1;
	return 0;
}

/* Called before the consts are torn down: no reaping may run afterwards. */
void xsie_transition_exit(void)
{
	cancel_work_sync(&xsie_reap_work);
}
