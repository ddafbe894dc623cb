// SPDX-License-Identifier: MIT
/*
 * SIE target for a signal that interrupts a thread inside a trampoline: a worker runs compute()
 * without pause while another thread sends it SIGUSR1 every 100 µs. The handler looks at the pc it
 * interrupted; the first time that is outside the executable's text (a trampoline: only while
 * armed) it writes "hit" and stays 300 ms in the handler, so that a disarm can run while the
 * interrupted pass waits to resume inside the trampoline. The main thread answers one line per
 * input line.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define K 100

extern char __executable_start[], etext[];
static pthread_t worker_thread;
static volatile int hits;

__attribute__((noinline)) long compute(long n)
{
	return n >= K ? n - K : n + 1000000;
}

static void on_usr1(int sig, siginfo_t *si, void *ctx)
{
	unsigned long pc = (unsigned long)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
	struct timespec stay = {0, 300 * 1000 * 1000};

	(void)sig;
	(void)si;
	/* Only the first interrupt inside a trampoline stays: a disarm must not wait forever. */
	if ((pc >= (unsigned long)__executable_start && pc < (unsigned long)etext) || hits++)
		return;
	if (write(1, "hit\n", 4) != 4)
		abort();
	nanosleep(&stay, NULL);
}

static void *worker(void *arg)
{
	volatile long sink = 0;

	(void)arg;
	for (long i = 0;; i++) {
		long n = 100000 + (i & 7);
		long r = compute(n);

		if (n - r < 1 || n - r > 100000)
			abort();
		sink += r;
	}
	return NULL;
}

static void *signaler(void *arg)
{
	struct timespec gap = {0, 100 * 1000};

	(void)arg;
	for (;;) {
		pthread_kill(worker_thread, SIGUSR1);
		nanosleep(&gap, NULL);
	}
	return NULL;
}

int main(void)
{
	struct sigaction sa = {.sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO | SA_RESTART};
	pthread_t s;
	char line[64];
	sigset_t usr1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_create(&worker_thread, NULL, worker, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL); /* only the worker takes it */
	pthread_create(&s, NULL, signaler, NULL);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
