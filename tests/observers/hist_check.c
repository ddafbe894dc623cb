// SPDX-License-Identifier: MIT
/*
 * Driver of the histogram unit test, linked with observers/hist.c:
 *   hist_check buckets      one line per bucket: "lo width index(lo) index(lo+width-1)"
 *   hist_check Q...         read integers from stdin, print their Q-quantiles from the histogram
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observer.h"

static __u64 slots[XT_HIST_SLOTS];

int main(int argc, char **argv)
{
	unsigned long long v;
	uint64_t lo, width;
	int i;

	if (argc == 2 && !strcmp(argv[1], "buckets")) {
		for (i = 0; i < XT_HIST_SLOTS; i++) {
			xt_hist_bucket(i, &lo, &width);
			printf("%llu %llu %u %u\n", (unsigned long long)lo,
			       (unsigned long long)width, xt_hist_index(lo),
			       xt_hist_index(lo + width - 1));
		}
		return 0;
	}
	while (scanf("%llu", &v) == 1)
		slots[xt_hist_index(v)]++;
	for (i = 1; i < argc; i++)
		printf("%.17g\n", xt_hist_quantile(slots, XT_HIST_SLOTS, atof(argv[i])));
	return 0;
}
