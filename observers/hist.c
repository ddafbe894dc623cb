// SPDX-License-Identifier: MIT
/* Quantiles of the log-linear histograms of include/xtune/observe_bpf.h. */
#include "observer.h"

void xt_hist_bucket(int idx, uint64_t *lo, uint64_t *width)
{
	int range = idx >> XT_HIST_SUB_BITS, sub = idx & (XT_HIST_SUB - 1);

	if (!range) {
		*lo = idx;
		*width = 1;
		return;
	}
	*lo = (uint64_t)(XT_HIST_SUB + sub) << (range - 1);
	*width = 1ull << (range - 1);
}

/*
 * The q-quantile (the value of rank ceil(q * total)) as the midpoint of the integers of its
 * bucket: within 1/32 of the exact value, exact below 16.
 */
double xt_hist_quantile(const __u64 *slots, int nslots, double q)
{
	uint64_t total = 0, seen = 0, lo, width;
	double rank;
	int b;

	for (b = 0; b < nslots; b++)
		total += slots[b];
	if (!total)
		return 0;
	rank = q * total;
	for (b = 0; b < nslots; b++) {
		seen += slots[b];
		if (slots[b] && seen >= rank)
			break;
	}
	if (b == nslots)
		b = nslots - 1;
	xt_hist_bucket(b, &lo, &width);
	return lo + (width - 1) / 2.0;
}
