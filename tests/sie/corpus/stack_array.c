// SPDX-License-Identifier: MIT
/* SIE corpus: stack array */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long compute(long n)
{
	long a[K];
	for (int i = 0; i < K; i++)
		a[i] = i * n;
	return a[(n < 0 ? -n : n) % K];
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
