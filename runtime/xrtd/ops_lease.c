// SPDX-License-Identifier: MIT
/*
 * Clients and their leases over the socket: hello (name the client this connection speaks for;
 * several connections may speak for one client), heartbeat (grant or extend its lease) and
 * release. A connection that never says hello speaks for the anonymous client "".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

#define LEASE_MS_DEFAULT 300
#define LEASE_MS_MAX	 10000

int op_hello(struct request *r, struct jbuf *out)
{
	const char *client;
	int ret = field_str(r, "client", true, &client);

	if (ret)
		return ret;
	if (!xrtd_name_valid(client, XRTD_CLIENT_LEN))
		return xrtd_errf(r->err, EINVAL,
				 "hello: client '%s' must be 1..%d characters of [A-Za-z0-9_.:-]",
				 client, XRTD_CLIENT_LEN - 1);
	if (r->client[0] && strcmp(r->client, client))
		return xrtd_errf(r->err, EBUSY, "hello: this connection is already client '%s'",
				 r->client);
	snprintf(r->client, XRTD_CLIENT_LEN, "%s", client);
	jb_printf(out, ",\"client\":");
	jb_str(out, client);
	return 0;
}

int op_heartbeat(struct request *r, struct jbuf *out)
{
	int64_t lease_ms = LEASE_MS_DEFAULT;
	bool given;
	int ret = field_int(r, "lease_ms", &given, &lease_ms);

	if (ret)
		return ret;
	if (lease_ms < 1 || lease_ms > LEASE_MS_MAX)
		return xrtd_errf(r->err, ERANGE, "heartbeat: lease_ms %" PRId64 " out of 1..%d",
				 lease_ms, LEASE_MS_MAX);
	ret = lease_grant(r->client, lease_ms, r->err);
	if (ret)
		return ret;
	jb_printf(out, ",\"deadline_ms\":%" PRId64, lease_ms);
	return 0;
}

int op_release(struct request *r, struct jbuf *out)
{
	(void)out;
	lease_release(r->client);
	return 0;
}
