// SPDX-License-Identifier: MIT
/* SIE corpus: store global */
#include <stdio.h>
#include <stdlib.h>

#define K 64

volatile long limit_seen;

__attribute__((noinline)) long compute(long n)
{
	limit_seen = K;
	return n + limit_seen;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
