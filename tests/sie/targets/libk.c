// SPDX-License-Identifier: MIT
/* A shared library with a perf-const: SIE retunes K in the process that loaded it (libk_main.c). */
#define K 100

__attribute__((noinline)) long compute(long n)
{
	return n < K ? 3 * n : n - K;
}
