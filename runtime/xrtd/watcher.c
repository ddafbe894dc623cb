// SPDX-License-Identifier: MIT
/*
 * The table watcher: applies desired values the tuner wrote into the shared table.
 * It sleeps in FUTEX_WAIT on the header's doorbell with a timeout: --poll-us when idle, 20 µs
 * for 100 ms after any change (bursts of writes get short latency without a busy loop). A
 * writer that rings the doorbell and calls FUTEX_WAKE is served at once.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "xrtd.h"

#define HOT_POLL_NS   20000ull
#define HOT_WINDOW_NS 100000000ull

static pthread_t thread;
static bool running;

static bool scan(void)
{
	bool changed = false;

	for (int i = 0; i < XT_KNOB_MAX; i++) {
		struct xrtd_knob *k = __atomic_load_n(&xrtd.knobs[i], __ATOMIC_ACQUIRE);
		char err[XRTD_ERR_LEN];
		uint64_t gen;

		if (!k || __atomic_load_n(&k->shared->desired_gen, __ATOMIC_ACQUIRE) == k->seen_gen)
			continue;
		pthread_mutex_lock(&xrtd.lock);
		/* Re-check under the lock: the knob may have been unregistered meanwhile. */
		if (xrtd.knobs[i] == k) {
			gen = __atomic_load_n(&k->shared->desired_gen, __ATOMIC_ACQUIRE);
			if (gen != k->seen_gen) {
				k->seen_gen = gen;
				knob_set(k, __atomic_load_n(&k->shared->desired, __ATOMIC_RELAXED),
					 "table write", "table", err);
				changed = true;
			}
		}
		pthread_mutex_unlock(&xrtd.lock);
	}
	return changed;
}

static void *watch(void *arg)
{
	uint32_t *doorbell = (uint32_t *)&xrtd.table->doorbell; /* low half (little endian) */
	uint64_t hot_until = 0;

	(void)arg;
	while (!__atomic_load_n(&xrtd.stop, __ATOMIC_ACQUIRE)) {
		uint32_t ring = __atomic_load_n(doorbell, __ATOMIC_ACQUIRE);
		uint64_t now, wait_ns;
		struct timespec ts;

		if (scan())
			hot_until = now_ns() + HOT_WINDOW_NS;
		now = now_ns();
		wait_ns = now < hot_until ? HOT_POLL_NS : (uint64_t)xrtd.opt.poll_us * 1000;
		ts.tv_sec = wait_ns / 1000000000ull;
		ts.tv_nsec = wait_ns % 1000000000ull;
		syscall(SYS_futex, doorbell, FUTEX_WAIT, ring, &ts, NULL, 0);
	}
	return NULL;
}

int watcher_start(void)
{
	int ret = pthread_create(&thread, NULL, watch, NULL);

	running = !ret;
	return -ret;
}

void watcher_stop(void)
{
	if (running)
		pthread_join(thread, NULL);
	running = false;
}
