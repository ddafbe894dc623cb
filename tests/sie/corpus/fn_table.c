// SPDX-License-Identifier: MIT
/* SIE corpus: a table of function pointers in .data.rel.ro next to code that holds the constant
 * (the functions move when the constant's encoding grows: relocated bytes differ, data does not) */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long add_k(long n)
{
	return n + K;
}

__attribute__((noinline)) long twice(long n)
{
	return 2 * n;
}

static long (*const ops[])(long) = {add_k, twice};

__attribute__((noinline)) long compute(long n)
{
	return ops[n & 1](n);
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
