// SPDX-License-Identifier: MIT
/*
 * SIE target for runs beside observers: WORKERS threads call one_round() without pause, which
 * calls compute() (the span of K) and aborts on any result no value of K could give; worker()
 * never returns. scaled() holds J across a call (its safe span has a return address in it).
 * One thread answers one line per input line: compute(n), and scaled(n) for "*n"; the main
 * thread is a worker.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define K	100
#define J	1000
#define WORKERS 4

__attribute__((noinline)) long compute(long n)
{
	return n >= K ? n - K : n + 1000000;
}

__attribute__((noipa)) long ident(long n)
{
	return n;
}

__attribute__((noinline)) long scaled(long n)
{
	return ident(n) * J;
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

static void *answer(void *arg)
{
	char line[64];

	(void)arg;
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", line[0] == '*' ? scaled(atol(line + 1)) : compute(atol(line)));
	exit(0);
}

int main(void)
{
	pthread_t t[WORKERS];

	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_create(&t[0], NULL, answer, NULL);
	for (long i = 1; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	worker(0); /* the main thread works too: a system call may be injected in a busy thread */
	return 0;
}
