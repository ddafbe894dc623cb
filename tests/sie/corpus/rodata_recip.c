// SPDX-License-Identifier: MIT
/* SIE corpus: the constant in code (the bound) and in .rodata (the folded double 1/K) */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long compute(long n)
{
	return n < K ? (long)(1e6 * n * (1.0 / K)) : -1;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
