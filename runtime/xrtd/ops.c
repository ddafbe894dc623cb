// SPDX-License-Identifier: MIT
/* The requests of the control protocol: which ops exist, which fields each takes, dispatch. */
#include <errno.h>
#include <string.h>

#include "ops.h"

struct op {
	const char *name;
	int (*fn)(struct request *r, struct jbuf *out);
	const char *fields; /* allowed fields besides "op", space-separated */
};

static const struct op ops[] = {
	{"register", op_register, "name backend target min max step enum netns"},
	{"unregister", op_unregister, "name"},
	{"set", op_set, "name value reason"},
	{"get", op_get, "name"},
	{"list", op_list, ""},
	{"begin", op_begin, ""},
	{"commit", op_commit, ""},
	{"abort", op_abort, ""},
	{"rollback", op_rollback, "names to reason"},
	{"good", op_good, "names"},
	{"keep", op_keep, "names"},
	{"hello", op_hello, "client"},
	{"heartbeat", op_heartbeat, "lease_ms"},
	{"release", op_release, ""},
	{"status", op_status, ""},
};

static bool field_allowed(const char *fields, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = fields; (p = strstr(p, key)); p += n)
		if ((p == fields || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return true;
	return false;
}

int ops_dispatch(struct peer *s, const char *line, size_t len, struct jbuf *out,
		 char err[XRTD_ERR_LEN])
{
	struct request r = {.err = err, .txn = &s->txn, .client = s->client};
	const struct op *op = NULL;
	struct json *j;
	int ret;

	if (strlen(line) != len)
		return xrtd_errf(err, EINVAL, "request contains a NUL byte at %zu", strlen(line));
	j = json_parse(line, err, XRTD_ERR_LEN);
	if (!j)
		return -EINVAL;
	r.j = j;
	if (j->type != JSON_OBJECT) {
		ret = xrtd_errf(err, EINVAL, "request must be a JSON object, not %s",
				json_type_name(j->type));
		goto out;
	}
	ret = field_str(&(struct request){.j = j, .op = "request", .err = err}, "op", true, &r.op);
	if (ret)
		goto out;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(ops[i].name, r.op))
			op = &ops[i];
	if (!op) {
		ret = xrtd_errf(err, EINVAL, "unknown op '%s'", r.op);
		goto out;
	}
	for (const struct json *m = j->child; m; m = m->next)
		if (strcmp(m->key, "op") && !field_allowed(op->fields, m->key)) {
			ret = xrtd_errf(err, EINVAL, "%s: unknown field '%s'", r.op, m->key);
			goto out;
		}
	apply_lock();
	ret = op->fn(&r, out);
	apply_unlock();
out:
	json_free(j);
	return ret;
}
