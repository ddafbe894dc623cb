// SPDX-License-Identifier: MIT
/*
 * Load for the func and syscall families' tests.
 *   uprobe_target calls N     call xt_work() exactly N times
 *   uprobe_target threads T MS   T threads each inside xt_nap() for MS ms, twice
 *   uprobe_target syscalls N  N getppid() system calls
 *   uprobe_target sleeps N    N calls of xt_sleep(), 2 to 9.92 ms; prints each call's duration
 *                             (ns, as seen by the caller)
 *   uprobe_target gated N     wait for a line on stdin, then call xt_work() N times
 *   uprobe_target rounds N    N calls xt_round(i % 97 - 20, i * 100000007)
 *   uprobe_target spin MS CPU spin MS ms on CPU (pinned after exec: the waits before it are
 *                             not the spinner's), then sleep until killed
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

volatile unsigned long sink;
static int nap_ms;

__attribute__((noinline)) void xt_work(unsigned long i)
{
	sink += i;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void xt_nap(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void xt_sleep(long ns)
{
	struct timespec ts = {ns / 1000000000, ns % 1000000000};

	nanosleep(&ts, NULL);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void xt_round(int active_flows, long backlog)
{
	sink += active_flows + backlog;
	__asm__ volatile("" ::: "memory");
}

static long elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000000000L + (b->tv_nsec - a->tv_nsec);
}

static void *napper(void *arg)
{
	xt_nap(nap_ms);
	xt_nap(nap_ms);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[64];
	long i, n;

	if (argc < 3)
		return 2;
	n = atol(argv[2]);
	if (!strcmp(argv[1], "calls")) {
		for (i = 0; i < n; i++)
			xt_work(i);
	} else if (!strcmp(argv[1], "sleeps")) {
		struct timespec t0, t1;

		for (i = 0; i < n; i++) {
			clock_gettime(CLOCK_MONOTONIC, &t0);
			xt_sleep(2000000L + (i * 37 % 100) * 80000L);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			printf("%ld\n", elapsed_ns(&t0, &t1));
		}
	} else if (!strcmp(argv[1], "rounds")) {
		for (i = 0; i < n; i++)
			xt_round(i % 97 - 20, i * 100000007L);
	} else if (!strcmp(argv[1], "gated")) {
		char line[16];

		if (!fgets(line, sizeof(line), stdin))
			return 1;
		for (i = 0; i < n; i++)
			xt_work(i);
	} else if (!strcmp(argv[1], "syscalls")) {
		for (i = 0; i < n; i++)
			syscall(SYS_getppid);
	} else if (!strcmp(argv[1], "spin") && argc == 4) {
		struct timespec t0, t;
		cpu_set_t cpus;

		CPU_ZERO(&cpus);
		CPU_SET(atoi(argv[3]), &cpus);
		if (sched_setaffinity(0, sizeof(cpus), &cpus))
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < n);
		printf("spun\n");
		fflush(stdout);
		pause();
	} else if (!strcmp(argv[1], "threads") && argc == 4 && n <= 64) {
		nap_ms = atoi(argv[3]);
		for (i = 0; i < n; i++)
			pthread_create(&th[i], NULL, napper, NULL);
		for (i = 0; i < n; i++)
			pthread_join(th[i], NULL);
	} else {
		return 2;
	}
	printf("done %ld\n", n);
	return 0;
}
