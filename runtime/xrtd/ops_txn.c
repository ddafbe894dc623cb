// SPDX-License-Identifier: MIT
/* Transactions over the socket: begin, commit, abort (sets in between are queued by op_set). */
#include <errno.h>
#include <inttypes.h>

#include "ops.h"

static uint64_t next_txn = 1;

int op_begin(struct request *r, struct jbuf *out)
{
	if (r->txn->id)
		return xrtd_errf(r->err, EBUSY, "begin: transaction %" PRIu64 " is already open",
				 r->txn->id);
	r->txn->id = next_txn++;
	r->txn->count = 0;
	jb_printf(out, ",\"txn\":%" PRIu64, r->txn->id);
	return 0;
}

int op_commit(struct request *r, struct jbuf *out)
{
	int ret;

	if (!r->txn->id)
		return xrtd_errf(r->err, EINVAL,
				 "commit: no transaction is open (send begin first)");
	ret = txn_commit(r->txn, r->err);
	r->txn->id = 0;
	if (ret)
		return ret;
	jb_printf(out, ",\"knobs\":[");
	for (int i = 0; i < r->txn->count; i++) {
		struct xrtd_knob *k = knob_at(r->txn->sets[i].slot);

		knob_own(k, r->client);
		jb_printf(out, i ? "," : "");
		knob_json(out, k);
	}
	jb_printf(out, "]");
	return 0;
}

int op_abort(struct request *r, struct jbuf *out)
{
	(void)out;
	if (!r->txn->id)
		return xrtd_errf(r->err, EINVAL, "abort: no transaction is open");
	r->txn->id = 0;
	return 0;
}
