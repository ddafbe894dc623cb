// SPDX-License-Identifier: MIT
/*
 * Threads created while a change of K waits for quiescence. K is a bound and a mask in one pass
 * (several spans): a pass that counted past a smaller mask than its bound sums less than it must
 * and the thread aborts. "spawn N": the spawner thread enters `spawn`, where a value derived
 * from K stays live (so it is inside K's span group and runs on while the engine holds the
 * others), and creates N workers there, 2 ms apart, before it leaves. "q": once every worker has
 * run a pass since, the smallest and largest count of their last passes and how many workers
 * there are.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define K	   64
#define RING	   4096
#define MAX_WORKER 512

/* entered: how many times the spawner entered `spawn` (a flag could rise and fall unseen) */
volatile long sink, spawning, entered;
static volatile long last_n[MAX_WORKER], passes[MAX_WORKER];
static volatile long nworkers;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;

/*
 * Returns n << 32 | the sum of i & (K - 1) for i < n (K): n (n - 1) / 2 when the bound and the
 * mask are one value; less when a pass counted past a smaller mask.
 */
__attribute__((noinline)) long pass(const volatile unsigned char *noise)
{
	long n = 0, sum = 0;

	/* noise is zeros the compiler cannot see: n counts up to K in a loop, not folded to K. */
	while (n < K) {
		sum += (long)((unsigned long)n & (K - 1));
		n += 1 + noise[n & 15];
	}
	return n << 32 | sum;
}

static void *worker(void *arg)
{
	static const volatile unsigned char zero[16];
	long me = (long)arg;

	for (;;) {
		long r = pass(zero), n = r >> 32, sum = r & 0xffffffff;

		if (n < 1 || n > RING || sum != n * (n - 1) / 2) {
			fprintf(stderr, "violation: worker %ld summed %ld for n = %ld\n", me, sum,
				n);
			abort();
		}
		last_n[me] = n;
		passes[me]++;
		usleep(200);
	}
	return NULL;
}

/* v, derived from K, stays live across the calls: the whole loop is inside K's span group. */
__attribute__((noinline)) long spawn(long count)
{
	long v = count + K;

	entered++;
	for (long i = 0; i < count && nworkers < MAX_WORKER; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, worker, (void *)nworkers))
			abort();
		pthread_detach(t);
		nworkers++;
		usleep(2000);
		v = v * 7 + 1;
	}
	return v;
}

static void *spawner(void *arg)
{
	(void)arg;
	for (;;) {
		long count;

		pthread_mutex_lock(&lock);
		while (!spawning)
			pthread_cond_wait(&wake, &lock);
		count = spawning;
		pthread_mutex_unlock(&lock);
		sink = spawn(count);
		spawning = 0;
	}
	return NULL;
}

int main(void)
{
	static long seen[MAX_WORKER];
	char line[64];
	pthread_t t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_create(&t, NULL, spawner, NULL);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "spawn ", 6)) {
			long before = entered;

			pthread_mutex_lock(&lock);
			spawning = atol(line + 6);
			pthread_cond_signal(&wake);
			pthread_mutex_unlock(&lock);
			while (entered == before)
				;
			puts("spawning");
		} else if (!strcmp(line, "q\n")) {
			long lo = RING, hi = 0, n;

			while (spawning)
				usleep(1000);
			n = nworkers;
			for (long i = 0; i < n; i++)
				seen[i] = passes[i];
			for (long i = 0; i < n; i++) {
				while (passes[i] == seen[i])
					usleep(100);
				lo = last_n[i] < lo ? last_n[i] : lo;
				hi = last_n[i] > hi ? last_n[i] : hi;
			}
			printf("%ld %ld %ld\n", lo, hi, n);
		}
	}
	return 0;
}
