// SPDX-License-Identifier: MIT
/*
 * A batch loop where K is a bound and a mask at once (several spans of one perf-const in one
 * pass): fill() takes K bytes from reads of up to CHUNK and marks slot n & (K - 1) for each. One
 * pass with one K marks K distinct slots; a pass that saw two values marks some slot twice or
 * counts past the ring, and the worker aborts. WORKERS threads run passes with a short wait
 * between them (a server between batches); main answers each input line with worker 0's last K.
 * Built with -DONE_READ, a pass reads K once (an empty asm hides the value from the compiler, so
 * the bound and the mask come from one register): one span, changed without stopping the target.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define K	64
#define CHUNK	7
#define RING	4096
#define WORKERS 2

#define OWN_WORKER /* fill()'s passes below */
#include "workers.h"

/* Returns n << 16 | distinct slots marked. */
__attribute__((noinline)) long fill(int fd)
{
	unsigned char seen[RING] = {0};
	unsigned char tmp[CHUNK];
	long n = 0, distinct = 0, k = K;

#ifdef ONE_READ
	__asm__("" : "+r"(k));
#endif
	while (n < k) {
		long got = read(fd, tmp, CHUNK), take;

		if (got <= 0)
			abort();
		take = k - n < got ? k - n : got;
		for (long i = 0; i < take; i++) {
			unsigned long idx = (unsigned long)(n + i + tmp[i]) & (k - 1);

			distinct += !seen[idx % RING];
			seen[idx % RING] = 1;
		}
		n += take;
	}
	return n << 16 | distinct;
}

static volatile long last_n;

static void *worker(void *arg)
{
	int fd = open("/dev/zero", O_RDONLY);

	for (;;) {
		long r = fill(fd), n = r >> 16, distinct = r & 0xffff;

		if (n < 1 || n > RING || distinct != n || (n & (n - 1))) {
			fprintf(stderr, "violation: a pass marked %ld slots for n = %ld\n",
				distinct, n);
			abort();
		}
		if (!arg)
			last_n = n;
		usleep(20);
	}
	return NULL;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	start_workers(worker, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", last_n);
	return 0;
}
