// SPDX-License-Identifier: MIT
/* Transactions: every queued set applied in order, or every applied one put back. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "apply.h"

int txn_commit(struct txn *t, char err[XRTD_ERR_LEN])
{
	int64_t old[XT_KNOB_MAX];
	char undo_err[XRTD_ERR_LEN];
	int done, ret = 0;

	journal_txn(t->id, "begin");
	apply_in_txn(t->id);
	for (done = 0; done < t->count; done++) {
		struct xrtd_knob *k = knob_at(t->sets[done].slot);

		if (!k || k->shared->reg_gen != t->sets[done].reg_gen) {
			ret = xrtd_errf(err, ENOENT, "a knob of the transaction was unregistered");
			break;
		}
		old[done] = k->applied;
		ret = knob_set(k, t->sets[done].value, t->sets[done].reason, "txn", err);
		if (ret)
			break;
	}
	if (ret) {
		char msg[XRTD_ERR_LEN];

		for (int j = done - 1; j >= 0; j--) {
			struct xrtd_knob *k = knob_at(t->sets[j].slot);

			if (knob_revert(k, old[j], "transaction failed", undo_err))
				fprintf(stderr, "xrtd: %s\n", undo_err);
		}
		snprintf(msg, sizeof(msg), "transaction %" PRIu64 " not applied: %s", t->id, err);
		snprintf(err, XRTD_ERR_LEN, "%s", msg);
	}
	apply_in_txn(0);
	journal_txn(t->id, ret ? "abort" : "commit");
	return ret;
}
