// SPDX-License-Identifier: MIT
/*
 * The busy threads of the SIE test targets. Define WORKERS, then start_workers(fn, first) runs fn
 * in threads first..WORKERS - 1, each given its index. Unless the target defines OWN_WORKER (it
 * has a span of its own), define K too: compute() holds the span of K, and worker() calls
 * one_round() -> compute() without pause and aborts on any result that no value of K could give;
 * worker() never returns. The functions are global so that gcc neither clones nor renames them.
 */
#include <pthread.h>
#include <stdlib.h>

static void start_workers(void *(*fn)(void *), long first)
{
	pthread_t t;

	for (long i = first; i < WORKERS; i++)
		pthread_create(&t, NULL, fn, (void *)i);
}

#ifndef OWN_WORKER
__attribute__((noinline)) long compute(long n)
{
	return n >= K ? n - K : n + 1000000;
}

__attribute__((noinline)) long one_round(long i)
{
	long n = 100000 + (i & 7) * 1000; /* n >= K for every K the tests set */
	long r = compute(n);
	volatile long sink = r;

	if (n - r < 1 || n - r > 100000)
		abort();
	for (int j = 0; j < 100; j++) /* other work between hits */
		sink = sink * 31 + j;
	return r;
}

__attribute__((noinline)) void *worker(void *arg)
{
	volatile long sink = 0;

	for (long i = (long)arg;; i++)
		sink += one_round(i);
	return NULL;
}
#endif
