// SPDX-License-Identifier: MIT
/*
 * K folded into a .rodata double next to a compare with K in the code. Built as is, the double is
 * 1.0 / K and the program runs with the rounding mode set upward (the compiler folds 1.0 / K to
 * nearest, so must a retuned one). With -DSQUARE the double is 1.0 / (K * K + 1), no c / K nor
 * c * K; with -DSINGLE it is the float 1.0f / K; with -DWRITABLE it is a global the program could
 * change (.data); with -DINDEXED an element of a table read at an index; with -DPOINTER a const
 * object whose address is also stored in data. SIE retunes none of those five.
 */
#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>

#define K 64

#if defined(WRITABLE)
double scale = 1.0 / K;
#elif defined(INDEXED)
static const double steps[2] = {1.0 / K, 3.0};
#elif defined(POINTER)
static const double recip = 1.0 / K;
const double *volatile recip_seen = &recip;
#endif

__attribute__((noinline)) long compute(long n)
{
#if defined(SQUARE)
	return n < K ? (long)(1e9 * n * (1.0 / (K * K + 1))) : -1;
#elif defined(WRITABLE)
	return n < K ? (long)(1e6 * n * scale) : -1;
#elif defined(INDEXED)
	return n < K ? (long)(1e6 * n * steps[n & 1]) : -1;
#elif defined(POINTER)
	return n < K ? (long)(1e6 * n * recip * *recip_seen) : -1;
#elif defined(SINGLE)
	return n < K ? (long)(1e6f * (float)n * (1.0f / K)) : -1;
#else
	return n < K ? (long)(1e6 * n * (1.0 / K)) : -1;
#endif
}

int main(void)
{
	char line[64];

	fesetround(FE_UPWARD);
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
