// SPDX-License-Identifier: MIT
/*
 * Multi-threaded SIE target: WORKERS threads run through compute()'s span without pause and abort
 * on any result that no value of K could give; the main thread answers one line per input line.
 */
#include <stdio.h>
#include <stdlib.h>

#define K	100
#define WORKERS 8

#include "workers.h"

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	start_workers(worker, 0);
	while (fgets(line, sizeof(line), stdin))
		printf("%ld\n", compute(atol(line)));
	return 0;
}
