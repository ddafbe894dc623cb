// SPDX-License-Identifier: MIT
/* SIE corpus: backoff */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long compute(long n)
{
	long t = 1;
	for (int i = 0; i < (n & 15); i++)
		t = t * 2 < K ? t * 2 : K;
	return t;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
