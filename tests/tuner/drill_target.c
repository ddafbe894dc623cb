// SPDX-License-Identifier: MIT
/*
 * The drill's test target: a loop calls slow(), which calls fast() (a few instructions) and
 * heavy(), which works a little and calls deeper() (most of the work), libc's strtol (through
 * the PLT) and fast() again through a pointer (an indirect call). Every 50 rounds it prints
 * "round N sum S", where S is known from N: a probe that disturbed the program would show there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;
static unsigned long total;

#define HEAVY_WORK  200000UL
#define DEEPER_WORK 1000000UL

static void work(unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		sink += i & 7;
}

__attribute__((noinline)) void fast(void)
{
	total += 1;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void deeper(void)
{
	work(DEEPER_WORK);
	total += 3;
	__asm__ volatile("" ::: "memory");
}

void (*volatile hook)(void) = fast;

__attribute__((noinline)) void heavy(void)
{
	work(HEAVY_WORK);
	deeper();
	hook();
	total += 2 + strtol("0", NULL, 10);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void slow(void)
{
	fast();
	heavy();
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	const struct timespec pause = {0, 2000000};
	unsigned long round;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (round = 1;; round++) {
		slow();
		if (round % 50 == 0)
			printf("round %lu sum %lu\n", round, total);
		nanosleep(&pause, NULL);
	}
}
