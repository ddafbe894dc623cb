// SPDX-License-Identifier: MIT
/* The lease over the socket: heartbeat (grant or extend) and release. */
#include <errno.h>
#include <inttypes.h>

#include "ops.h"

#define LEASE_MS_DEFAULT 300
#define LEASE_MS_MAX	 10000

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
	lease_grant(lease_ms);
	jb_printf(out, ",\"deadline_ms\":%" PRId64, lease_ms);
	return 0;
}

int op_release(struct request *r, struct jbuf *out)
{
	(void)r;
	(void)out;
	lease_release();
	return 0;
}
