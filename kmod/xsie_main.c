// SPDX-License-Identifier: GPL-2.0
/*
 * xsie: Scoped Indirect Execution for the perf-consts of the running kernel.
 *
 * /dev/xsie (root only) loads critical spans and safe spans, arms and disarms consts alone or in
 * transactions, and reports status; mmap() gives the value page user space writes V into.
 * See include/xtune/xsie.h (top level) for the interface and README.md for how it is tested.
 */
#define pr_fmt(fmt) "xsie: " fmt

#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "xsie_internal.h"

struct xsie_value_page *xsie_values;
DEFINE_MUTEX(xsie_lock);
static struct xsie_const xsie_consts[XSIE_MAX_CONSTS];

/* An open transaction belongs to the file that began it; so does the kernel build check. */
struct xsie_file {
	bool kernel_ok; /* XSIE_IOC_KERNEL named the running kernel's build */
	bool txn_open;
	u32 n;
	u32 ids[XSIE_TXN_MAX];
};

static u64 xsie_sum(u64 __percpu *counter)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu) sum += *per_cpu_ptr(counter, cpu);
	return sum;
}

static void xsie_counters_reset(struct xsie_const *c)
{
	int cpu;

	for_each_possible_cpu(cpu)
	{
		*per_cpu_ptr(c->hits, cpu) = 0;
		*per_cpu_ptr(c->applied, cpu) = 0;
		*per_cpu_ptr(c->old_hits, cpu) = 0;
	}
}

static struct xsie_const *xsie_const_get(u32 id)
{
	return id < XSIE_MAX_CONSTS ? &xsie_consts[id] : NULL;
}

static struct xsie_group *xsie_group_new(u32 mode)
{
	int i;

	for (i = 0; i < XSIE_MAX_CONSTS; i++) {
		struct xsie_group *g = &xsie_groups[i];

		if (!g->in_use) {
			g->in_use = true;
			g->mode = mode;
			g->n = 0;
			return g;
		}
	}
	return NULL;
}

/*
 * An exit probe runs before its instruction: on a conditional jump it cannot tell whether the
 * thread leaves, so the count of the global transition and of flips would be wrong.
 */
static bool xsie_cond_exit(const struct xsie_const *c, const char *what)
{
	u32 j;

	for (j = 0; j < c->nsafe; j++) {
		if (c->safe[j].cond_exit) {
			pr_warn("%s refused: %s+%#x is a conditional exit\n", what, c->safe[j].func,
				c->safe[j].cond_exit - 1);
			return true;
		}
	}
	return false;
}

/* Arm the consts @ids together (one transaction) with transition @mode. */
static int xsie_arm(const u32 *ids, u32 n, u32 mode)
{
	struct xsie_group *g;
	u32 i, j;
	int ret;

	if (!n || mode > XSIE_MODE_GLOBAL)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		struct xsie_const *c = xsie_const_get(ids[i]);

		if (!c || c->state != XSIE_LOADED || !c->nspans)
			return c && c->state >= XSIE_TRANSITION ? -EBUSY : -ENOENT;
		if (mode != XSIE_MODE_IMMEDIATE && !c->nsafe)
			return -ENOEXEC; /* a safe transition needs the safe spans */
		if (mode == XSIE_MODE_GLOBAL && xsie_cond_exit(c, "global transition"))
			return -EOPNOTSUPP;
		for (j = 0; j < i; j++)
			if (ids[j] == ids[i])
				return -EINVAL;
	}
	g = xsie_group_new(mode);
	if (!g)
		return -ENOSPC;
	for (i = 0; i < n; i++)
		g->members[g->n++] = &xsie_consts[ids[i]];
	ret = xsie_group_arm(g);
	if (ret)
		g->in_use = false;
	return ret;
}

static int xsie_disarm(u32 id)
{
	struct xsie_const *c = xsie_const_get(id);

	if (!c || c->state < XSIE_TRANSITION)
		return -ENOENT;
	xsie_group_disarm(c->group);
	return 0;
}

static int xsie_unload(u32 id)
{
	struct xsie_const *c = xsie_const_get(id);

	if (!c || c->state == XSIE_UNUSED)
		return -ENOENT;
	if (c->state != XSIE_LOADED)
		return -EBUSY;
	c->nspans = 0;
	c->nsafe = 0;
	c->state = XSIE_UNUSED;
	return 0;
}

static int xsie_load_span(const struct xsie_span_desc *d)
{
	struct xsie_const *c = xsie_const_get(d->const_id);
	int ret;

	if (!c)
		return -EINVAL;
	if (c->state >= XSIE_TRANSITION)
		return -EBUSY;
	ret = xsie_span_load(c, d);
	if (ret)
		return ret;
	if (c->state == XSIE_UNUSED) {
		xsie_counters_reset(c);
		c->min = d->v0;
		c->max = d->v0;
		c->multiple_of = 1;
		c->power_of_two = false;
		c->in_effect = d->v0;
		WRITE_ONCE(xsie_values->value[c->id], d->v0);
		c->state = XSIE_LOADED;
	}
	return 0;
}

static int xsie_load_safe(const struct xsie_safe_desc *d)
{
	struct xsie_const *c = xsie_const_get(d->const_id);

	if (!c || c->state == XSIE_UNUSED)
		return -ENOENT; /* spans first */
	if (c->state >= XSIE_TRANSITION)
		return -EBUSY;
	return xsie_safe_load(c, d);
}

static int xsie_load_range(const struct xsie_range *r)
{
	struct xsie_const *c = xsie_const_get(r->const_id);

	if (!c || c->state == XSIE_UNUSED)
		return -ENOENT; /* spans first */
	if (c->state >= XSIE_TRANSITION)
		return -EBUSY;
	return xsie_range_load(c, r);
}

static int xsie_set(const struct xsie_value *v)
{
	struct xsie_const *c = xsie_const_get(v->const_id);

	if (!c || c->state == XSIE_UNUSED)
		return -ENOENT;
	if (!xsie_value_valid(c, v->value)) {
		pr_warn("value refused: const %u: %lld is not a valid V: [%lld, %lld], multiple of "
			"%lld%s\n",
			c->id, v->value, c->min, c->max, c->multiple_of,
			c->power_of_two ? ", power of two" : "");
		return -ERANGE;
	}
	if (c->nspans > 1 && c->state >= XSIE_TRANSITION) {
		int ret = xsie_cond_exit(c, "later value (a flip)") ? -EOPNOTSUPP
								    : xsie_value_flip(c, v->value);

		if (ret)
			return ret;
	}
	WRITE_ONCE(xsie_values->value[c->id], v->value);
	return 0;
}

/* The running kernel's build id (vmlinux_build_id, found through kallsyms). */
static int xsie_kernel_check(struct xsie_file *xf, const struct xsie_kernel *k)
{
	const u8 *running = (const u8 *)xsie_symbol("vmlinux_build_id");

	if (!running) {
		pr_warn("spans refused: cannot read this kernel's build id (vmlinux_build_id)\n");
		return -ENOENT;
	}
	if (memcmp(running, k->build_id, XSIE_BUILD_ID_LEN)) {
		pr_warn("spans refused: they are for another kernel build (%*phN, running %*phN)\n",
			XSIE_BUILD_ID_LEN, k->build_id, XSIE_BUILD_ID_LEN, running);
		xf->kernel_ok = false;
		return -EXDEV;
	}
	xf->kernel_ok = true;
	return 0;
}

static int xsie_status(struct xsie_status *st)
{
	struct xsie_const *c = xsie_const_get(st->const_id);
	struct xsie_group *g;

	if (!c)
		return -EINVAL;
	g = c->group;
	st->state = c->state;
	st->nspans = c->nspans;
	xsie_span_counts(c, &st->optimized, &st->int3);
	st->hits = xsie_sum(c->hits);
	st->applied = xsie_sum(c->applied);
	st->old_value_hits = xsie_sum(c->old_hits);
	st->mode = g ? g->mode : 0;
	st->group = g ? g->id : 0;
	st->inside = g ? atomic_long_read(&g->inside) : 0;
	st->refcount_updates = g ? atomic64_read(&g->refcount_updates) : 0;
	st->transition_ns = g && READ_ONCE(g->t_done_ns) ? g->t_done_ns - g->t_start_ns : 0;
	if (g && c->state == XSIE_TRANSITION && READ_ONCE(g->active) && !READ_ONCE(g->counting) &&
	    (g->mode != XSIE_MODE_PER_THREAD || READ_ONCE(g->t_done_ns)))
		st->state = XSIE_ARMED;
	return 0;
}

static long xsie_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct xsie_file *xf = file->private_data;
	void __user *uarg = (void __user *)arg;
	union {
		struct xsie_span_desc span;
		struct xsie_safe_desc safe;
		struct xsie_arm arm;
		struct xsie_status status;
		struct xsie_range range;
		struct xsie_value value;
		struct xsie_kernel kernel;
		u32 id;
	} u;
	long ret;

	if (_IOC_TYPE(cmd) != XSIE_IOC_MAGIC || _IOC_SIZE(cmd) > sizeof(u))
		return -ENOTTY;
	if ((_IOC_DIR(cmd) & _IOC_WRITE) && copy_from_user(&u, uarg, _IOC_SIZE(cmd)))
		return -EFAULT;

	if ((cmd == XSIE_IOC_LOAD_SPAN || cmd == XSIE_IOC_LOAD_SAFE ||
	     cmd == XSIE_IOC_LOAD_RANGE) &&
	    !xf->kernel_ok) {
		pr_warn("spans refused: the kernel build they are for was not named first\n");
		return -EXDEV;
	}
	mutex_lock(&xsie_lock);
	switch (cmd) {
	case XSIE_IOC_KERNEL:
		ret = xsie_kernel_check(xf, &u.kernel);
		break;
	case XSIE_IOC_LOAD_SPAN:
		ret = xsie_load_span(&u.span);
		break;
	case XSIE_IOC_LOAD_SAFE:
		ret = xsie_load_safe(&u.safe);
		break;
	case XSIE_IOC_LOAD_RANGE:
		ret = xsie_load_range(&u.range);
		break;
	case XSIE_IOC_SET:
		ret = xsie_set(&u.value);
		break;
	case XSIE_IOC_ARM:
		if (xf->txn_open) {
			ret = xf->n < XSIE_TXN_MAX ? 0 : -ENOSPC;
			if (!ret)
				xf->ids[xf->n++] = u.arm.const_id;
		} else {
			ret = xsie_arm(&u.arm.const_id, 1, u.arm.mode);
		}
		break;
	case XSIE_IOC_DISARM:
		ret = xsie_disarm(u.id);
		break;
	case XSIE_IOC_UNLOAD:
		ret = xsie_unload(u.id);
		break;
	case XSIE_IOC_STATUS:
		ret = xsie_status(&u.status);
		break;
	case XSIE_IOC_TXN_BEGIN:
		ret = xf->txn_open ? -EBUSY : 0;
		xf->txn_open = true;
		xf->n = 0;
		break;
	case XSIE_IOC_TXN_COMMIT:
		ret = xf->txn_open ? xsie_arm(xf->ids, xf->n, u.id) : -EINVAL;
		xf->txn_open = false;
		break;
	case XSIE_IOC_TXN_ABORT:
		ret = xf->txn_open ? 0 : -EINVAL;
		xf->txn_open = false;
		break;
	default:
		ret = -ENOTTY;
	}
	mutex_unlock(&xsie_lock);

	if (!ret && cmd == XSIE_IOC_STATUS && copy_to_user(uarg, &u.status, sizeof(u.status)))
		ret = -EFAULT;
	return ret;
}

static int xsie_mmap(struct file *file, struct vm_area_struct *vma)
{
	if (vma->vm_pgoff || vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	return vm_insert_page(vma, vma->vm_start, virt_to_page(xsie_values));
}

static int xsie_open(struct inode *inode, struct file *file)
{
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	file->private_data = kzalloc(sizeof(struct xsie_file), GFP_KERNEL);
	return file->private_data ? 0 : -ENOMEM;
}

static int xsie_release(struct inode *inode, struct file *file)
{
	kfree(file->private_data); /* an open transaction is aborted */
	return 0;
}

static const struct file_operations xsie_fops = {
	.owner = THIS_MODULE,
	.open = xsie_open,
	.release = xsie_release,
	.unlocked_ioctl = xsie_ioctl,
	.mmap = xsie_mmap,
};

static struct miscdevice xsie_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "xsie",
	.fops = &xsie_fops,
	.mode = 0600,
};

static void xsie_consts_free(void)
{
	int i;

	for (i = 0; i < XSIE_MAX_CONSTS; i++) {
		free_percpu(xsie_consts[i].hits);
		free_percpu(xsie_consts[i].applied);
		free_percpu(xsie_consts[i].old_hits);
	}
}

static int __init xsie_init(void)
{
	int i, ret;

	ret = xsie_symbols_init();
	if (ret)
		return ret;
	ret = xsie_transition_init();
	if (ret)
		return ret;
	xsie_values = (void *)get_zeroed_page(GFP_KERNEL);
	if (!xsie_values)
		return -ENOMEM;
	for (i = 0; i < XSIE_MAX_CONSTS; i++) {
		struct xsie_const *c = &xsie_consts[i];

		c->id = i;
		c->hits = alloc_percpu(u64);
		c->applied = alloc_percpu(u64);
		c->old_hits = alloc_percpu(u64);
		if (!c->hits || !c->applied || !c->old_hits) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	ret = misc_register(&xsie_dev);
	if (ret)
		goto fail;
	pr_info("ready: /dev/xsie, %d consts\n", XSIE_MAX_CONSTS);
	return 0;
fail:
	xsie_consts_free();
	free_page((unsigned long)xsie_values);
	return ret;
}

/* Unload in order: no new control calls, every probe of every transaction, then the reaper. */
static void __exit xsie_exit(void)
{
	int i;

	misc_deregister(&xsie_dev);
	mutex_lock(&xsie_lock);
	for (i = 0; i < XSIE_MAX_CONSTS; i++)
		if (xsie_groups[i].in_use)
			xsie_group_disarm(&xsie_groups[i]);
	mutex_unlock(&xsie_lock);
	xsie_transition_exit();
	xsie_consts_free();
	free_page((unsigned long)xsie_values);
	pr_info("unloaded: every probe removed\n");
}

module_init(xsie_init);
module_exit(xsie_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Scoped Indirect Execution: tune kernel perf-consts through kprobes");
