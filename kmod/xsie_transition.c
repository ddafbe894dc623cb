// SPDX-License-Identifier: GPL-2.0
/*
 * Transitions (KernelX §3.5): when a transaction's new values start to apply.
 *
 *  - immediate: at once;
 *  - per-thread: a thread uses the new values inside safe-span executions it entered after the
 *    switch; executions already running finish with the old values (kretprobes track entries);
 *  - global: one stop_machine() counts the frames of every thread inside a safe span (reliable
 *    unwinder; tried again while some stack is not reliable, refused after that); entry and
 *    exit probes then keep that count (self-converging reference count), and the exit that
 *    brings it to zero has the switch made by a stop_machine() that counts the stacks again
 *    and switches only if it finds none inside: a thread that enters while the count reaches
 *    zero has not read a value yet, and no thread can run between the last count and the
 *    switch. The monitors are removed afterwards.
 *
 * Later values (XSIE_IOC_SET on an armed const) keep the same guarantee in every mode: a thread
 * inside a safe span finishes that execution with the value it entered with. A const with one
 * span needs nothing more (its handler reads the value once per execution); a const with
 * several spans gets a flip, made like the global switch: the new value is pending until a
 * stop_machine() finds no thread inside the transaction's safe spans. The entry/exit probes of
 * such a transaction are placed at arm and stay until disarm; between transitions they only
 * test a flag.
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

/* Makes the switch of a count that reached zero, then removes its probes (not from a handler). */
static void xsie_settle(struct work_struct *work);
static DECLARE_WORK(xsie_settle_work, xsie_settle);

static struct xsie_group *xsie_rp_group(struct kretprobe_instance *ri)
{
	return container_of(get_kretprobe(ri), struct xsie_safe, rp)->c->group;
}

static int xsie_rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct xsie_group *g = xsie_rp_group(ri);

	if (!READ_ONCE(g->active))
		return 1; /* entered before the switch: this execution keeps the old values */
	if (!xsie_task_enter(g))
		return 1; /* table full: this execution keeps the old values */
	atomic_inc(&g->rp_live);
	/* A per-thread transition is complete when the first thread has switched. */
	if (!READ_ONCE(g->t_done_ns))
		cmpxchg(&g->t_done_ns, 0, ktime_get_ns());
	return 0;
}

static int xsie_rp_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct xsie_group *g = xsie_rp_group(ri);

	atomic_dec(&g->rp_live);
	xsie_task_leave(g);
	return 0;
}

/* The switch, with no thread inside a safe span: pending flips first, then the first switch. */
static void xsie_group_switch(struct xsie_group *g)
{
	u32 i;

	for (i = 0; i < g->n; i++) {
		struct xsie_const *c = g->members[i];

		if (c->flip_pending) {
			WRITE_ONCE(c->in_effect, c->pending);
			c->flip_pending = false;
		}
	}
	g->t_done_ns = ktime_get_ns();
	smp_wmb(); /* the values and the completion time are visible before the switch */
	WRITE_ONCE(g->active, 1);
	WRITE_ONCE(g->counting, 0);
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
			schedule_work(&xsie_settle_work);
	}
	return 0;
}

#define xsie_for_each_safe(g, i, j, ss)                                                            \
	for (i = 0; i < (g)->n; i++)                                                               \
		for (j = 0; j < (g)->members[i]->nsafe && ((ss) = &(g)->members[i]->safe[j]); j++)

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

static void xsie_safe_unplace(struct xsie_safe *ss, bool counters)
{
	u32 k;

	if (!counters) {
		unregister_kretprobe(&ss->rp);
		return;
	}
	unregister_kprobe(&ss->entry.kp);
	for (k = 0; k < ss->nexits; k++)
		unregister_kprobe(&ss->exit_kp[k].kp);
}

/* Entry/exit probes (counters) or a kretprobe (per-thread) on one safe span; all or nothing. */
static int xsie_safe_place(struct xsie_safe *ss, bool counters)
{
	u32 k;
	int ret;

	if (!counters) {
		/*
		 * A kretprobe sits on the function's entry, its ftrace site: an ftrace kprobe.
		 * Placing and removing these under a plug load crashed the guest under
		 * multi-threaded TCG (a vCPU ran a stale translation of the patched site); under
		 * single-threaded TCG long arm/disarm storms ran clean (kmod/README.md).
		 */
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
	ret = xsie_monitor_place(&ss->entry, ss, ss->entry_addr - ss->start, xsie_entry_pre);
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

static int xsie_probes_place(struct xsie_group *g, bool counters)
{
	struct xsie_safe *ss;
	u32 i, j, placed = 0;
	int ret = 0;

	xsie_for_each_safe(g, i, j, ss)
	{
		ret = xsie_safe_place(ss, counters);
		if (ret)
			goto undo;
		placed++;
	}
	if (counters)
		g->counters = true;
	else
		g->monitors = true;
	return 0;
undo:
	xsie_for_each_safe(g, i, j, ss)
	{
		if (!placed)
			return ret;
		xsie_safe_unplace(ss, counters);
		placed--;
	}
	return ret;
}

static void xsie_counters_remove(struct xsie_group *g)
{
	struct xsie_safe *ss;
	u32 i, j;

	if (!g->counters)
		return;
	xsie_for_each_safe(g, i, j, ss) xsie_safe_unplace(ss, true);
	g->counters = false;
}

/* After a switch: the counters go unless the transaction keeps them for its later flips. */
static void xsie_counters_release(struct xsie_group *g)
{
	if (!g->keep_counters)
		xsie_counters_remove(g);
}

#define XSIE_DRAIN_MS 2000
static void xsie_monitors_unregister(struct xsie_group *g)
{
	struct xsie_safe *ss;
	u32 i, j;
	int k;

	xsie_counters_remove(g);
	if (!g->monitors)
		return;
	/*
	 * Unregistering kretprobes while executions they hooked are still returning crashed the
	 * 6.1 guest under a plug load (a call through 0 in the hooked function's caller): stop
	 * hooking new executions, let the hooked ones return, then unregister.
	 */
	xsie_for_each_safe(g, i, j, ss) disable_kretprobe(&ss->rp);
	for (k = 0; k < XSIE_DRAIN_MS && atomic_read(&g->rp_live) > 0; k++)
		msleep(1);
	if (atomic_read(&g->rp_live) > 0)
		pr_warn("transaction %u: %d executions still inside a safe span after %d ms\n",
			g->id, atomic_read(&g->rp_live), XSIE_DRAIN_MS);
	synchronize_rcu();
	xsie_for_each_safe(g, i, j, ss) xsie_safe_unplace(ss, false);
	g->monitors = false;
	xsie_tasks_forget(g);
}

/*
 * A return address inside (start, end): never start itself, which follows a call. In a safe
 * span, start is where its entry probe sits: a frame returning there (to the ftrace site's end)
 * has not reached the probe yet, which counts it when it does.
 */
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
		if (xsie_in_range(addr, ss->entry_addr, ss->end) ||
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
 * reliable unwinder (as livepatch does). With none inside, the switch is made here, where no
 * thread can run between the count and the switch; else the entry/exit probes keep the count.
 * Return: 0, or -EAGAIN when a stack was not reliable (e.g. a task interrupted mid-function):
 * the caller tries again a little later.
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
	if (inside)
		WRITE_ONCE(g->counting, 1);
	else
		xsie_group_switch(g);
	return 0;
}

/* Count (and switch when none is inside) with the stacks still; -EAGAIN after every try. */
static int xsie_count(struct xsie_group *g)
{
	int i, ret = -EAGAIN;

	for (i = 0; i < XSIE_COUNT_TRIES && ret == -EAGAIN; i++) {
		if (i)
			msleep(20);
		ret = stop_machine(xsie_count_inside, g, NULL);
	}
	return ret;
}

/* Whether a member of @g reads its value at several spans (its later values flip). */
static bool xsie_group_flips(struct xsie_group *g)
{
	u32 i;

	for (i = 0; i < g->n; i++)
		if (g->members[i]->nspans > 1)
			return true;
	return false;
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
	atomic_set(&g->rp_live, 0);
	atomic64_set(&g->refcount_updates, 0);
	for (i = 0; i < g->n; i++) {
		struct xsie_const *c = g->members[i];
		s64 v = READ_ONCE(xsie_values->value[c->id]);

		/* The handlers read in_effect only once the group is active. */
		if (xsie_value_valid(c, v))
			c->in_effect = v;
		c->flip_pending = false;
		c->group = g;
		ret = xsie_spans_register(c);
		if (ret)
			goto undo_spans;
	}
	for (i = 0; i < g->n; i++)
		g->members[i]->state = XSIE_TRANSITION;
	if (g->mode != XSIE_MODE_IMMEDIATE) {
		ret = xsie_probes_place(g, g->mode == XSIE_MODE_GLOBAL);
		if (ret)
			goto undo_all;
	}
	g->keep_counters = xsie_group_flips(g);
	if (g->keep_counters && !g->counters) {
		ret = xsie_probes_place(g, true);
		if (ret) {
			xsie_monitors_unregister(g);
			goto undo_all;
		}
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
		ret = xsie_count(g);
		if (ret) {
			pr_warn("global transition refused: the stack of task %d is not reliable "
				"after %d tries\n",
				xsie_unreliable_pid, XSIE_COUNT_TRIES);
			xsie_monitors_unregister(g);
			goto undo_all;
		}
		if (READ_ONCE(g->active))
			xsie_counters_release(g);
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
 * xsie_value_flip - a later value for an armed const read at several spans
 * @c: the const (caller holds xsie_lock, checked @v against the range)
 * @v: its new value
 *
 * The value is pending until no thread is inside a safe span of the transaction (see the top of
 * this file); it is in effect when the status no longer reports a transition.
 *
 * Return: 0 (in effect, or pending), -EBUSY when an earlier switch of the transaction still waits
 * or no stack could be read reliably (nothing changed), or a kprobe error.
 */
int xsie_value_flip(struct xsie_const *c, s64 v)
{
	struct xsie_group *g = c->group;
	int ret;

	if (READ_ONCE(g->counting) || !READ_ONCE(g->active)) {
		pr_warn("value refused: const %u: an earlier transition still waits for threads to "
			"leave its safe spans\n",
			c->id);
		return -EBUSY;
	}
	if (!g->counters) {
		ret = xsie_probes_place(g, true);
		if (ret)
			return ret;
	}
	c->pending = v;
	c->flip_pending = true;
	atomic_long_set(&g->inside, 0);
	g->t_start_ns = ktime_get_ns();
	g->t_done_ns = 0;
	ret = xsie_count(g);
	if (ret) {
		c->flip_pending = false;
		g->t_done_ns = g->t_start_ns;
		xsie_counters_release(g);
		pr_warn("value refused: const %u: the stack of task %d is not reliable after %d "
			"tries\n",
			c->id, xsie_unreliable_pid, XSIE_COUNT_TRIES);
		return -EBUSY;
	}
	if (!READ_ONCE(g->counting))
		xsie_counters_release(g);
	return 0;
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
	g->keep_counters = false;
	xsie_monitors_unregister(g);
	xsie_members_unregister(g, g->n);
	xsie_wait_optimizer();
	for (i = 0; i < g->n; i++) {
		g->members[i]->group = NULL;
		g->members[i]->flip_pending = false;
		g->members[i]->state = XSIE_LOADED;
	}
	g->in_use = false;
}

static void xsie_settle(struct work_struct *work)
{
	int i;

	mutex_lock(&xsie_lock);
	for (i = 0; i < XSIE_MAX_CONSTS; i++) {
		struct xsie_group *g = &xsie_groups[i];

		if (!g->in_use || !g->counters)
			continue;
		/* A count that reached zero: switch only if the stacks agree (-EAGAIN: the next
		 * exit to zero tries again). */
		if (READ_ONCE(g->counting) && atomic_long_read(&g->inside) <= 0)
			xsie_count(g);
		if (!READ_ONCE(g->counting) && READ_ONCE(g->active))
			xsie_counters_release(g);
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

/* Called before the consts are torn down: no settling may run afterwards. */
void xsie_transition_exit(void)
{
	cancel_work_sync(&xsie_settle_work);
}
