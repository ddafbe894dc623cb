// SPDX-License-Identifier: MIT
/*
 * A thread that calls exec while a change waits for quiescence. K is read in two functions, so a
 * change needs every thread outside both; after "hold" a worker (not the main thread) stays inside
 * `second` and, a second later, execs /bin/cat (which echoes lines back) from there.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define K 100

volatile long sink;
volatile int hold, inside;

__attribute__((noinline)) long first(long n)
{
	return n >= K ? n - K : n + 1000000;
}

/* v, derived from K, stays live through the loop: the whole loop is in the safe span. */
__attribute__((noinline)) long second(long n)
{
	long v = n + K;
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	inside = 1;
	for (;;) {
		v = v * 7 + 1;
		clock_gettime(CLOCK_MONOTONIC, &b);
		if ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) >= 1000000000L)
			break;
	}
	sink = v;
	execl("/bin/cat", "cat", (char *)NULL);
	abort();
}

static void *worker(void *arg)
{
	(void)arg;
	while (!hold)
		usleep(1000);
	return (void *)second(sink & 0xff);
}

/* Lines: "hold" (the worker enters `second`: exec a second later), or a number for `first`. */
int main(void)
{
	char line[64];
	pthread_t t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_create(&t, NULL, worker, NULL);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "hold\n")) {
			hold = 1;
			while (!inside)
				usleep(100);
			puts("held");
		} else {
			printf("%ld\n", first(atol(line)));
		}
	}
	return 0;
}
