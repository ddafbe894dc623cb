// SPDX-License-Identifier: MIT
/* SIE corpus: the constant sizes a heap allocation that outlives the call (malloc(K * 8)) */
#include <stdio.h>
#include <stdlib.h>

#define K 64

long *ring;

__attribute__((noinline)) long compute(long n)
{
	if (!ring) {
		ring = malloc(K * sizeof(long));
		if (!ring)
			return -1;
		for (long i = 0; i < K; i++)
			ring[i] = 0;
	}
	long slot = (n < 0 ? -n : n) % K;

	ring[slot] += n;
	return ring[slot];
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
