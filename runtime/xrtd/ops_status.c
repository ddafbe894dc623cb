// SPDX-License-Identifier: MIT
/* status: what xrtd runs with and what it has done. */
#include <inttypes.h>
#include <unistd.h>

#include "ops.h"

static const char *socket_path;

void status_set_socket(const char *path)
{
	socket_path = path;
}

int op_status(struct request *r, struct jbuf *out)
{
	const struct xrtd_counters *n = &xrtd_counters;
	int64_t remaining;
	bool held = lease_held(&remaining);

	(void)r;
	jb_printf(out, ",\"pid\":%d,\"shm\":", getpid());
	jb_str(out, table_name());
	jb_printf(out, ",\"socket\":");
	jb_str(out, socket_path);
	jb_printf(out, ",\"journal\":");
	jb_str(out, journal_path());
	jb_printf(out, ",\"audit\":");
	jb_str(out, audit_path());
	jb_printf(out,
		  ",\"knobs\":%d,\"lease\":{\"held\":%s,\"remaining_ms\":%" PRId64
		  ",\"expiries\":%" PRIu64 ",\"action\":\"%s\"},\"counters\":{\"requests\":%" PRIu64
		  ",\"request_errors\":%" PRIu64 ",\"applied\":%" PRIu64 ",\"refused\":%" PRIu64
		  ",\"failed\":%" PRIu64 ",\"restored\":%" PRIu64 "}",
		  knob_count(), held ? "true" : "false", remaining, n->lease_expiries,
		  lease_action_name(), n->requests, n->request_errors, n->applied, n->refused,
		  n->failed, n->restored);
	return 0;
}
