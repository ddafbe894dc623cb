// SPDX-License-Identifier: MIT
/* Two perf-consts in one process, armed together as one transaction. */
#include <stdio.h>
#include <stdlib.h>

#define K 100
#define L 7

__attribute__((noinline)) long compute(long n)
{
	return n >= K ? n - K : n + 1000000;
}

__attribute__((noinline)) long scale(long n)
{
	return n + L * 3;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld %ld\n", compute(atol(line)), scale(atol(line)));
	return 0;
}
