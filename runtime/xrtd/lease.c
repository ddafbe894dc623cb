// SPDX-License-Identifier: MIT
/*
 * The lease: a tuner that stops sending heartbeats loses its changes. On expiry every armed,
 * non-kept knob goes back to its last good value (--lease-action good) or its original.
 */
#include <stdio.h>

#include "apply.h"

static enum lease_action action = LEASE_TO_GOOD;
static bool held;
static uint64_t deadline_ns;

void lease_set_action(enum lease_action a)
{
	action = a;
}

const char *lease_action_name(void)
{
	return action == LEASE_TO_GOOD ? "good" : "original";
}

void lease_grant(uint64_t ms)
{
	held = true;
	deadline_ns = now_ns() + ms * 1000000;
	table_set_lease_deadline(deadline_ns);
}

void lease_release(void)
{
	held = false;
	deadline_ns = 0;
	table_set_lease_deadline(0);
}

bool lease_held(int64_t *remaining_ms)
{
	*remaining_ms = held ? ((int64_t)deadline_ns - (int64_t)now_ns()) / 1000000 : 0;
	return held;
}

void lease_check(void)
{
	char err[XRTD_ERR_LEN];

	if (!held || now_ns() < deadline_ns)
		return;
	lease_release();
	xrtd_counters.lease_expiries++;
	for (int i = XT_KNOB_MAX - 1; i >= 0; i--) {
		struct xrtd_knob *k = knob_at(i);
		int64_t to;

		if (!k || !k->armed || k->kept)
			continue;
		to = action == LEASE_TO_GOOD ? k->good : k->original;
		if (knob_revert(k, to, "lease expired", err))
			fprintf(stderr, "xrtd: %s\n", err);
	}
}
