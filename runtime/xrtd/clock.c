// SPDX-License-Identifier: MIT
/* The one clock of xrtd (table timestamps, lease deadlines, the watcher's hot window). */
#include <time.h>

#include "util.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}
