// SPDX-License-Identifier: MIT
/*
 * A process that forks and execs on request. "N": compute(N); "f N": a child computes compute(N)
 * and exits (its line comes first, then "forked"); "x": exec /bin/cat, which echoes lines back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define K 100

__attribute__((noinline)) long compute(long n)
{
	return n >= K ? n - K : n + 1000000;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		if (line[0] == 'f') {
			pid_t c = fork();

			if (c == 0) {
				printf("%ld\n", compute(atol(line + 2)));
				_exit(0);
			}
			waitpid(c, NULL, 0);
			printf("forked\n");
		} else if (line[0] == 'x') {
			execl("/bin/cat", "cat", (char *)NULL);
			return 1;
		} else {
			printf("%ld\n", compute(atol(line)));
		}
	}
	return 0;
}
