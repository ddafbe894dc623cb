// SPDX-License-Identifier: MIT
/* SIE corpus: one constant inlined into several callers */
#include <stdio.h>
#include <stdlib.h>

#define K 64

static inline long cap(long n)
{
	return n > K ? K : n;
}
__attribute__((noinline)) long first(long n)
{
	return cap(n) + 1;
}
__attribute__((noinline)) long second(long n)
{
	return cap(n * 2) - 1;
}
__attribute__((noinline)) long compute(long n)
{
	return first(n) * 1000 + second(n);
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
