// SPDX-License-Identifier: MIT
/*
 * Benchmark target: "run N" calls compute() N times and prints the cost per call in ns;
 * "watch V" spins on compute(0) until it returns V and prints the CLOCK_MONOTONIC time it did.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define K 100

__attribute__((noinline)) long compute(long n)
{
	return n + K;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int main(void)
{
	char line[64];
	long n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "run %ld", &n) == 1) {
			long long t0 = now_ns();
			volatile long sink = 0;

			for (long i = 0; i < n; i++)
				sink += compute(i);
			printf("%.3f %ld\n", (double)(now_ns() - t0) / (double)n, sink);
		} else if (sscanf(line, "watch %ld", &n) == 1) {
			volatile long zero = 0; /* compute() is pure: keep the call in the loop */

			while (compute(zero) != n)
				;
			printf("%lld\n", now_ns());
		}
	}
	return 0;
}
