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

#include "workers.h"

__attribute__((noipa)) long ident(long n)
{
	return n;
}

__attribute__((noinline)) long scaled(long n)
{
	return ident(n) * J;
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
	pthread_t t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_create(&t, NULL, answer, NULL);
	start_workers(worker, 1);
	worker(0); /* the main thread works too: a system call may be injected in a busy thread */
	return 0;
}
