// SPDX-License-Identifier: MIT
/* SIE corpus: a vectorized loop whose trip count K needs no remainder loop when K is a multiple
 * of the vector width */
#include <stdio.h>
#include <stdlib.h>

#define K 64

int tab[1024];

__attribute__((noinline)) long compute(long n)
{
	int s = 0;

	for (int i = 0; i < K; i++)
		s += tab[i] ^ (int)n;
	return s;
}

int main(void)
{
	char line[64];

	for (int i = 0; i < 1024; i++)
		tab[i] = i * 7;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
