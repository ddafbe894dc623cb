// SPDX-License-Identifier: MIT
/* status: what xrtd runs with and what it has done. */
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "ops.h"

static const char *socket_path;

void status_set_socket(const char *path)
{
	socket_path = path;
}

/* {"client", "held", "remaining_ms", "expiries", "knobs": names of the knobs it owns} */
static void lease_json(struct jbuf *out, const struct lease *l)
{
	bool first = true;

	jb_printf(out, "{\"client\":");
	jb_str(out, l->client);
	jb_printf(out,
		  ",\"held\":%s,\"remaining_ms\":%" PRId64 ",\"expiries\":%" PRIu64 ",\"knobs\":[",
		  l->held ? "true" : "false", lease_remaining_ms(l), l->expiries);
	for (int i = 0; i < XT_KNOB_MAX; i++) {
		const struct xrtd_knob *k = knob_at(i);

		if (!k || strcmp(k->client, l->client))
			continue;
		jb_printf(out, first ? "" : ",");
		jb_str(out, k->name);
		first = false;
	}
	jb_printf(out, "]}");
}

int op_status(struct request *r, struct jbuf *out)
{
	const struct xrtd_counters *n = &xrtd_counters;
	const struct lease *own = lease_of(r->client);
	const struct lease *l;

	jb_printf(out, ",\"pid\":%d,\"shm\":", getpid());
	jb_str(out, table_name());
	jb_printf(out, ",\"socket\":");
	jb_str(out, socket_path);
	jb_printf(out, ",\"journal\":");
	jb_str(out, journal_path());
	jb_printf(out, ",\"audit\":");
	jb_str(out, audit_path());
	jb_printf(out, ",\"client\":");
	jb_str(out, r->client);
	/* "lease": this connection's client's, as before clients had names; "leases": all. */
	jb_printf(out,
		  ",\"knobs\":%d,\"lease\":{\"held\":%s,\"remaining_ms\":%" PRId64
		  ",\"expiries\":%" PRIu64 ",\"action\":\"%s\"},\"leases\":[",
		  knob_count(), own && own->held ? "true" : "false", lease_remaining_ms(own),
		  own ? own->expiries : 0, lease_action_name());
	for (int i = 0; (l = lease_at(i)); i++) {
		jb_printf(out, i ? "," : "");
		lease_json(out, l);
	}
	jb_printf(out,
		  "],\"counters\":{\"requests\":%" PRIu64 ",\"request_errors\":%" PRIu64
		  ",\"applied\":%" PRIu64 ",\"refused\":%" PRIu64 ",\"failed\":%" PRIu64
		  ",\"restored\":%" PRIu64 ",\"lease_expiries\":%" PRIu64 "}",
		  n->requests, n->request_errors, n->applied, n->refused, n->failed, n->restored,
		  n->lease_expiries);
	return 0;
}
