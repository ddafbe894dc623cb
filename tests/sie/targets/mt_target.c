// SPDX-License-Identifier: MIT
/*
 * Multi-threaded SIE target: WORKERS threads run through compute()'s span without pause and abort
 * on any result that no value of K could give; the main thread answers one line per input line.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define K	100
#define WORKERS 8

__attribute__((noinline)) long compute(long n)
{
	return n >= K ? n - K : n + 1000000;
}

static void *worker(void *arg)
{
	volatile long sink = 0;

	for (long i = (long)arg;; i++) {
		long n = 100000 + (i & 7) * 1000; /* n >= K for every K the test sets */
		long r = compute(n);

		if (n - r < 1 || n - r > 100000)
			abort();
		sink += r;
		for (int j = 0; j < 100; j++) /* other work between hits */
			sink = sink * 31 + j;
	}
	return NULL;
}

int main(void)
{
	pthread_t t[WORKERS];
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (long i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
