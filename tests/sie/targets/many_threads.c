// SPDX-License-Identifier: MIT
/*
 * SIE target with many threads: argv[1] threads wait in pause() (outside the span); the main
 * thread answers one line per input line with compute(n). Arming must refuse a thread count the
 * engine cannot check, never leave threads untraced.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define K 100

__attribute__((noinline)) long compute(long n)
{
	return n >= K ? n - K : n + 1000000;
}

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	pthread_attr_t a;
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	for (int i = 0; i < n; i++) {
		pthread_t t;

		if (pthread_create(&t, &a, idle, NULL))
			return 1;
	}
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
