// SPDX-License-Identifier: MIT
/*
 * K read in two functions, so two spans with separate safe spans. `first` answers requests; a
 * worker thread can be held inside `second`, looping on a value derived from K, until released.
 * While it is there no thread is in `first`'s spans, and still arming or changing K must wait.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K 100

volatile long sink;
volatile int hold, inside;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;

__attribute__((noinline)) long first(long n)
{
	return n >= K ? n - K : n + 1000000;
}

/* v, derived from K, stays live through the loop: the whole loop is in the safe span. */
__attribute__((noinline)) long second(long n)
{
	long v = n + K;

	inside = 1;
	while (hold)
		v = v * 7 + 1;
	inside = 0;
	return v;
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&lock);
		while (!hold)
			pthread_cond_wait(&wake, &lock);
		pthread_mutex_unlock(&lock);
		sink = second(sink & 0xff);
	}
	return NULL;
}

/* Lines: "hold" (the worker enters `second` and stays), "release", or a number for `first`. */
int main(void)
{
	char line[64];
	pthread_t t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_create(&t, NULL, worker, NULL);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "hold\n")) {
			pthread_mutex_lock(&lock);
			hold = 1;
			pthread_cond_signal(&wake);
			pthread_mutex_unlock(&lock);
			while (!inside)
				;
			puts("held");
		} else if (!strcmp(line, "release\n")) {
			hold = 0;
			while (inside)
				;
			puts("released");
		} else {
			printf("%ld\n", first(atol(line)));
		}
	}
	return 0;
}
