// SPDX-License-Identifier: MIT
/* SIE corpus: static table */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long compute(long n)
{
	static long tab[K];
	tab[(n < 0 ? -n : n) % K] += n;
	return tab[(n < 0 ? -n : n) % K];
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
