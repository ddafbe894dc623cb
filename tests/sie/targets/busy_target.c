// SPDX-License-Identifier: MIT
/* A thread that never leaves the safe span of K: attach must be refused, never forced. */
#include <stdio.h>
#include <stdlib.h>

#define K 100

volatile long sink;

__attribute__((noinline)) void spin(void)
{
	for (;;)
		sink += K;
}

int main(void)
{
	puts("ready");
	fflush(stdout);
	spin();
	return 0;
}
