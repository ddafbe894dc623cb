// SPDX-License-Identifier: MIT
/* SIE corpus: sub loop */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long compute(long n)
{
	long r = n < 0 ? -n : n;
	while (r >= K)
		r -= K;
	return r;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
