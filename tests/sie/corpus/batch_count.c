// SPDX-License-Identifier: MIT
/* SIE corpus: batch count */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long compute(long n)
{
	long b = 0;
	for (long i = 0; i < (n < 0 ? 0 : n % 1000); i += K)
		b++;
	return b;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
