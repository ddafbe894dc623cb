/* SPDX-License-Identifier: MIT */
/* The control protocol's requests (ops*.c), answered for control.c with the apply lock held. */
#ifndef XRTD_OPS_H
#define XRTD_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "apply.h"
#include "json.h"

/* One control connection. */
struct peer {
	struct txn txn;		      /* its transaction (id 0: none open) */
	char client[XRTD_CLIENT_LEN]; /* the client it speaks for (hello), "" = anonymous */
};

struct request {
	const struct json *j;
	const char *op;
	char *err;
	struct txn *txn; /* the connection's transaction */
	char *client;	 /* the connection's client name */
};

/* ops.c: parse one request line, check its op and fields, run it; the reply body goes to out. */
int ops_dispatch(struct peer *s, const char *line, size_t len, struct jbuf *out,
		 char err[XRTD_ERR_LEN]);

/* ops_fields.c: request fields; each failure names the op and the field. */
int field_str(struct request *r, const char *key, bool required, const char **out);
int field_int(struct request *r, const char *key, bool *present, int64_t *out);
/* "names": a list of registered knob names, NULL when absent (all knobs). */
int field_names(struct request *r, const struct json **out);
bool named(const struct json *names, const struct xrtd_knob *k);
/* The knob of field "name". */
int find_knob(struct request *r, struct xrtd_knob **k);
/* Field "value": an integer, or for enum knobs one of its strings. */
int value_of(struct request *r, const struct xrtd_knob *k, int64_t *value);

/* ops_render.c */
void knob_json(struct jbuf *b, const struct xrtd_knob *k);
/* ,"knobs":[...] of the knobs in `names` (NULL: all). */
void knobs_json(struct jbuf *b, const struct json *names);

/* The handlers, one file per concern. */
int op_register(struct request *r, struct jbuf *out);	/* ops_knob.c */
int op_unregister(struct request *r, struct jbuf *out); /* ops_knob.c */
int op_set(struct request *r, struct jbuf *out);	/* ops_knob.c */
int op_get(struct request *r, struct jbuf *out);	/* ops_knob.c */
int op_list(struct request *r, struct jbuf *out);	/* ops_knob.c */
int op_begin(struct request *r, struct jbuf *out);	/* ops_txn.c */
int op_commit(struct request *r, struct jbuf *out);	/* ops_txn.c */
int op_abort(struct request *r, struct jbuf *out);	/* ops_txn.c */
int op_rollback(struct request *r, struct jbuf *out);	/* ops_revert.c */
int op_good(struct request *r, struct jbuf *out);	/* ops_revert.c */
int op_keep(struct request *r, struct jbuf *out);	/* ops_revert.c */
int op_hello(struct request *r, struct jbuf *out);	/* ops_lease.c */
int op_heartbeat(struct request *r, struct jbuf *out);	/* ops_lease.c */
int op_release(struct request *r, struct jbuf *out);	/* ops_lease.c */
int op_status(struct request *r, struct jbuf *out);	/* ops_status.c */
/* The socket path status reports (ops_status.c). */
void status_set_socket(const char *path);

#endif /* XRTD_OPS_H */
