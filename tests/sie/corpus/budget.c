// SPDX-License-Identifier: MIT
/* SIE corpus: budget */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long compute(long n)
{
	long used = 0, served = 0;
	while (used + 7 <= K && served < n) {
		used += 7;
		served++;
	}
	return served;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
