// SPDX-License-Identifier: MIT
/*
 * Leases, one per client (a connection's name given by hello, "" for the anonymous client): a
 * tuner that stops sending heartbeats loses its changes. On expiry every armed, non-kept knob the
 * client owns (registered or set last) goes back to its last good value (--lease-action good) or
 * its original; other clients' knobs and leases are untouched.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "apply.h"

static enum lease_action action = LEASE_TO_GOOD;
static struct lease leases[LEASE_MAX]; /* a client's entry stays (its expiries) until reused */
static int lease_count;

void lease_set_action(enum lease_action a)
{
	action = a;
}

const char *lease_action_name(void)
{
	return action == LEASE_TO_GOOD ? "good" : "original";
}

/* The table header shows the earliest deadline: when the first knobs may go back. */
static void publish_deadline(void)
{
	uint64_t first = 0;

	for (int i = 0; i < lease_count; i++)
		if (leases[i].held && (!first || leases[i].deadline_ns < first))
			first = leases[i].deadline_ns;
	table_set_lease_deadline(first);
}

static struct lease *find(const char *client)
{
	for (int i = 0; i < lease_count; i++)
		if (!strcmp(leases[i].client, client))
			return &leases[i];
	return NULL;
}

int lease_grant(const char *client, uint64_t ms, char err[XRTD_ERR_LEN])
{
	struct lease *l = find(client);

	if (!l && lease_count < LEASE_MAX)
		l = &leases[lease_count++];
	for (int i = 0; !l && i < LEASE_MAX; i++) /* full: reuse the entry of a lease not held */
		if (!leases[i].held)
			l = &leases[i];
	if (l && strcmp(l->client, client)) {
		*l = (struct lease){0};
		snprintf(l->client, sizeof(l->client), "%s", client);
	}
	if (!l)
		return xrtd_errf(err, ENOSPC,
				 "heartbeat: %d leases are held, no room for client '%s'",
				 LEASE_MAX, client);
	l->held = true;
	l->deadline_ns = now_ns() + ms * 1000000;
	publish_deadline();
	return 0;
}

void lease_release(const char *client)
{
	struct lease *l = find(client);

	if (!l)
		return;
	l->held = false;
	l->deadline_ns = 0;
	publish_deadline();
}

const struct lease *lease_of(const char *client)
{
	return find(client);
}

const struct lease *lease_at(int i)
{
	return i < lease_count ? &leases[i] : NULL;
}

int64_t lease_remaining_ms(const struct lease *l)
{
	return l && l->held ? ((int64_t)l->deadline_ns - (int64_t)now_ns()) / 1000000 : 0;
}

static void expire(struct lease *l)
{
	char err[XRTD_ERR_LEN], reason[XRTD_CLIENT_LEN + 32];

	lease_release(l->client);
	l->expiries++;
	xrtd_counters.lease_expiries++;
	if (l->client[0])
		snprintf(reason, sizeof(reason), "lease expired (client %s)", l->client);
	else
		snprintf(reason, sizeof(reason), "lease expired");
	for (int i = XT_KNOB_MAX - 1; i >= 0; i--) {
		struct xrtd_knob *k = knob_at(i);
		int64_t to;

		if (!k || !k->armed || k->kept || strcmp(k->client, l->client))
			continue;
		to = action == LEASE_TO_GOOD ? k->good : k->original;
		if (knob_revert(k, to, reason, err))
			fprintf(stderr, "xrtd: %s\n", err);
	}
}

void lease_check(void)
{
	uint64_t now = now_ns();

	for (int i = 0; i < lease_count; i++)
		if (leases[i].held && now >= leases[i].deadline_ns)
			expire(&leases[i]);
}
