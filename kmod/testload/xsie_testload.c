// SPDX-License-Identifier: GPL-2.0
/*
 * xsie_testload: load generators that make two perf-consts visible inside the test guest.
 *
 * debugfs xsie_testload/
 *   shrinker   a shrinker with no batch of its own, so do_shrink_slab() hands it SHRINK_BATCH
 *              objects per call. Writing N makes it report N objects; reading gives
 *              "calls=<scan calls> max_nr_to_scan=<largest batch seen>". Writing "hold" parks
 *              the next scan (inside do_shrink_slab) until "release" is written.
 *   softirq    writing N runs a tasklet that reschedules itself N times; handle_softirqs()
 *              restarts at most MAX_SOFTIRQ_RESTART times before deferring to ksoftirqd, so
 *              reading gives "runs_before_deferral=<runs in the first softirq pass>" (the one
 *              local_bh_enable() runs in the writer's context).
 *   limit      writing N stores whether N > XSIE_TESTLOAD_LIMIT, a constant that gcc turns into
 *              `cmp $LIMIT, reg` feeding a branch: the case of xsie's cmp update. Reading gives
 *              "over=<0|1>". The Makefile also builds this file with other limits for analysis.
 */
#define pr_fmt(fmt) "xsie_testload: " fmt

#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/interrupt.h>
#include <linux/module.h>
#include <linux/shrinker.h>
#include <linux/wait.h>

#ifndef XSIE_TESTLOAD_LIMIT
#define XSIE_TESTLOAD_LIMIT 100
#endif

static struct dentry *testload_dir;

/* Every file reads back as one line of "key=value" fields. */
static __printf(4, 5) ssize_t
	read_line(char __user *ubuf, size_t len, loff_t *ppos, const char *fmt, ...)
{
	char buf[64];
	va_list args;
	int n;

	va_start(args, fmt);
	n = vscnprintf(buf, sizeof(buf), fmt, args);
	va_end(args);
	return simple_read_from_buffer(ubuf, len, ppos, buf, n);
}

static unsigned long shrink_objects;
static unsigned long shrink_calls;
static unsigned long shrink_max_batch;
static bool shrink_hold;
static DECLARE_WAIT_QUEUE_HEAD(shrink_wait);

static unsigned long testload_count(struct shrinker *s, struct shrink_control *sc)
{
	return READ_ONCE(shrink_objects);
}

static unsigned long testload_scan(struct shrinker *s, struct shrink_control *sc)
{
	unsigned long n = sc->nr_to_scan;

	if (READ_ONCE(shrink_hold)) {
		pr_info("scan parked inside do_shrink_slab\n");
		wait_event_timeout(shrink_wait, !READ_ONCE(shrink_hold), 60 * HZ);
	}
	shrink_calls++;
	if (n > shrink_max_batch)
		shrink_max_batch = n;
	sc->nr_scanned = n;
	return SHRINK_STOP; /* frees nothing: drop_caches does not loop on us */
}

static struct shrinker testload_shrinker = {
	.count_objects = testload_count,
	.scan_objects = testload_scan,
	.seeks = DEFAULT_SEEKS,
	.batch = 0, /* 0: do_shrink_slab() uses SHRINK_BATCH */
};

static ssize_t shrinker_write(struct file *f, const char __user *ubuf, size_t len, loff_t *ppos)
{
	char buf[16] = {};
	unsigned long n;

	if (copy_from_user(buf, ubuf, min(len, sizeof(buf) - 1)))
		return -EFAULT;
	if (!strncmp(buf, "hold", 4)) {
		WRITE_ONCE(shrink_hold, true);
	} else if (!strncmp(buf, "release", 7)) {
		WRITE_ONCE(shrink_hold, false);
		wake_up_all(&shrink_wait);
	} else if (!kstrtoul(strim(buf), 0, &n)) {
		shrink_calls = 0;
		shrink_max_batch = 0;
		WRITE_ONCE(shrink_objects, n);
	} else {
		return -EINVAL;
	}
	return len;
}

static ssize_t shrinker_read(struct file *f, char __user *ubuf, size_t len, loff_t *ppos)
{
	return read_line(ubuf, len, ppos, "calls=%lu max_nr_to_scan=%lu\n", shrink_calls,
			 shrink_max_batch);
}

static const struct file_operations shrinker_fops = {
	.write = shrinker_write,
	.read = shrinker_read,
};

static struct task_struct *burst_task;
static bool burst_first_pass; /* inside the local_bh_enable() that runs the first pass */
static int burst_left;
static int burst_runs_in_caller;
static DECLARE_COMPLETION(burst_done);

static void burst_fn(struct tasklet_struct *t)
{
	if (READ_ONCE(burst_first_pass) && current == burst_task)
		burst_runs_in_caller++;
	if (--burst_left > 0)
		tasklet_schedule(t);
	else
		complete(&burst_done);
}

static DECLARE_TASKLET(burst_tasklet, burst_fn);

static ssize_t softirq_write(struct file *f, const char __user *ubuf, size_t len, loff_t *ppos)
{
	int n, ret;

	ret = kstrtoint_from_user(ubuf, len, 0, &n);
	if (ret)
		return ret;
	if (n < 1 || n > 100000)
		return -EINVAL;
	reinit_completion(&burst_done);
	burst_task = current;
	burst_left = n;
	burst_runs_in_caller = 0;
	/* Raised with bottom halves off: the softirq pass runs in local_bh_enable(), here. */
	local_bh_disable();
	tasklet_schedule(&burst_tasklet);
	WRITE_ONCE(burst_first_pass, true);
	local_bh_enable();
	WRITE_ONCE(burst_first_pass, false);
	wait_for_completion(&burst_done);
	return len;
}

static ssize_t softirq_read(struct file *f, char __user *ubuf, size_t len, loff_t *ppos)
{
	return read_line(ubuf, len, ppos, "runs_before_deferral=%d\n", burst_runs_in_caller);
}

static const struct file_operations softirq_fops = {
	.write = softirq_write,
	.read = softirq_read,
};

static int limit_over;

/* Out of line, so that the compare stays in a function of its own (the span's safe span). */
static noinline int testload_over(int n)
{
	return n > XSIE_TESTLOAD_LIMIT ? 1 : -1;
}

static ssize_t limit_write(struct file *f, const char __user *ubuf, size_t len, loff_t *ppos)
{
	int n, ret = kstrtoint_from_user(ubuf, len, 0, &n);

	if (ret)
		return ret;
	limit_over = testload_over(n) > 0;
	return len;
}

static ssize_t limit_read(struct file *f, char __user *ubuf, size_t len, loff_t *ppos)
{
	return read_line(ubuf, len, ppos, "over=%d\n", limit_over);
}

static const struct file_operations limit_fops = {
	.write = limit_write,
	.read = limit_read,
};

static int __init testload_init(void)
{
	int ret = register_shrinker(&testload_shrinker, "xsie-testload");

	if (ret)
		return ret;
	testload_dir = debugfs_create_dir("xsie_testload", NULL);
	debugfs_create_file("shrinker", 0600, testload_dir, NULL, &shrinker_fops);
	debugfs_create_file("softirq", 0600, testload_dir, NULL, &softirq_fops);
	debugfs_create_file("limit", 0600, testload_dir, NULL, &limit_fops);
	return 0;
}

static void __exit testload_exit(void)
{
	debugfs_remove_recursive(testload_dir);
	WRITE_ONCE(shrink_hold, false);
	wake_up_all(&shrink_wait);
	unregister_shrinker(&testload_shrinker);
	tasklet_kill(&burst_tasklet);
}

module_init(testload_init);
module_exit(testload_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("xsie test load: a shrinker and a softirq burst that expose perf-consts");
