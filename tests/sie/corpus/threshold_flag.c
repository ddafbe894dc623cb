// SPDX-License-Identifier: MIT
/* SIE corpus: threshold flag */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long compute(long n)
{
	int over = n > K;
	return over ? n - K : K - n;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
