// SPDX-License-Identifier: MIT
/*
 * A process whose main thread ends with pthread_exit while others run on. A server thread answers
 * "N" with compute(N) and "e" by letting the main thread exit ("exited" once it is a zombie);
 * WORKERS threads run through compute()'s span and abort on any result no value of K could give.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define K	100
#define WORKERS 4

#include "workers.h"

static int leave[2];

/* The main thread's state letter from /proc: 'Z' once it has exited. */
static char main_state(void)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", getpid(), getpid());
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

static void *server(void *arg)
{
	char line[64];

	(void)arg;
	while (fgets(line, sizeof(line), stdin)) {
		if (line[0] == 'e') {
			if (write(leave[1], "e", 1) != 1)
				abort();
			while (main_state() != 'Z')
				usleep(1000);
			printf("exited\n");
		} else {
			printf("%ld\n", compute(atol(line)));
		}
	}
	exit(0);
}

int main(void)
{
	pthread_t t;
	char c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(leave))
		return 1;
	start_workers(worker, 0);
	pthread_create(&t, NULL, server, NULL);
	if (read(leave[0], &c, 1) != 1)
		return 1;
	pthread_exit(NULL);
}
