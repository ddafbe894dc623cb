// SPDX-License-Identifier: MIT
/*
 * The table watcher: applies desired values the tuner wrote into the shared table.
 * It sleeps in FUTEX_WAIT on the header's doorbell with a timeout: --poll-us when idle, 20 µs
 * for 100 ms after any change (bursts of writes get short latency without a busy loop). A
 * writer that rings the doorbell and calls FUTEX_WAKE is served at once.
 *
 * After a quiet spell the watcher is usually woken on the CPU where the writer (or the polling
 * application it tunes) is running. The scheduler then lets that task finish its slice
 * (0.75 ms × (1 + log2 CPUs) by default) before the watcher runs: milliseconds per first change.
 * A short slice of its own (--slice-us, EEVDF's sched_runtime for SCHED_OTHER, Linux ≥ 6.12)
 * gives the watcher an earlier deadline, so its wakeup preempts the running task.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "xtune/sched_slice.h"

#define HOT_POLL_NS   20000ull
#define HOT_WINDOW_NS 100000000ull

static pthread_t thread;
static bool running;
static int stop;
static unsigned poll_us;  /* idle poll period */
static int rt_priority;	  /* SCHED_FIFO priority, 0 = normal scheduling */
static unsigned slice_us; /* the slice under normal scheduling, 0 = default */

static bool scan(void)
{
	int used = knob_slots_used();
	bool changed = false;

	/* Slots ever registered only: an idle poll reads a few cache lines, not 128 KiB. */
	for (int i = 0; i < used; i++) {
		struct xt_knob_slot *s = table_slot(i);
		char err[XRTD_ERR_LEN];
		struct xrtd_knob *k;
		uint64_t gen;

		/*
		 * Pending when desired_gen moved past the generation last answered. Only shared
		 * memory is read here: the knob itself may be unregistered and freed until the lock
		 * is held.
		 */
		if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) == XT_KNOB_FREE ||
		    __atomic_load_n(&s->desired_gen, __ATOMIC_ACQUIRE) ==
			    __atomic_load_n(&s->applied_gen, __ATOMIC_RELAXED))
			continue;
		apply_lock();
		k = knob_at(i);
		if (k) {
			gen = __atomic_load_n(&k->shared->desired_gen, __ATOMIC_ACQUIRE);
			if (gen != k->seen_gen) {
				k->seen_gen = gen;
				knob_set(k, __atomic_load_n(&k->shared->desired, __ATOMIC_RELAXED),
					 "table write", "table", err);
				changed = true;
			}
		}
		apply_unlock();
	}
	return changed;
}

/*
 * SCHED_FIFO with --rt-priority (on a busy host a normal thread may wait milliseconds for a CPU
 * behind other runnable tasks; the watcher only runs briefly between futex sleeps), else normal
 * scheduling with a short slice (--slice-us).
 */
static void set_scheduling(void)
{
	int ret = xt_sched_set(rt_priority, slice_us);

	if (ret)
		fprintf(stderr,
			"xrtd: %s: %s, the table watcher runs with the default scheduling\n",
			rt_priority ? "--rt-priority: cannot set SCHED_FIFO"
				    : "--slice-us: cannot set the slice",
			strerror(-ret));
}

static void *watch(void *arg)
{
	uint32_t *doorbell = table_doorbell();
	uint64_t hot_until = 0;

	(void)arg;
	set_scheduling();
	/* The default 50 µs timer slack would stretch the 20 µs hot poll several times over. */
	prctl(PR_SET_TIMERSLACK, 1000);
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		uint32_t ring = __atomic_load_n(doorbell, __ATOMIC_ACQUIRE);
		uint64_t now, wait_ns;
		struct timespec ts;

		if (scan())
			hot_until = now_ns() + HOT_WINDOW_NS;
		now = now_ns();
		wait_ns = now < hot_until ? HOT_POLL_NS : (uint64_t)poll_us * 1000;
		ts.tv_sec = wait_ns / 1000000000ull;
		ts.tv_nsec = wait_ns % 1000000000ull;
		syscall(SYS_futex, doorbell, FUTEX_WAIT, ring, &ts, NULL, 0);
	}
	return NULL;
}

int watcher_start(unsigned poll_period_us, int fifo_priority, unsigned sched_slice_us)
{
	int ret;

	poll_us = poll_period_us;
	rt_priority = fifo_priority;
	slice_us = sched_slice_us;
	ret = pthread_create(&thread, NULL, watch, NULL);
	running = !ret;
	return -ret;
}

void watcher_stop(void)
{
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	if (running)
		pthread_join(thread, NULL);
	running = false;
}
