// SPDX-License-Identifier: MIT
/* The control socket: line-delimited JSON requests, one reply line each (runtime/README.md). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "json.h"
#include "xrtd.h"

#define CLIENT_MAX	 32
#define LINE_MAX_BYTES	 65536
#define LEASE_MS_DEFAULT 300
#define LEASE_MS_MAX	 10000

struct client {
	int fd;
	size_t len;
	char buf[LINE_MAX_BYTES];
	struct txn txn;
};

static int listen_fd = -1, signal_fd = -1;
static struct client *clients[CLIENT_MAX];
static uint64_t next_txn = 1;

static const char *const state_names[] = {"free",    "registered", "applying",	 "applied",
					  "refused", "failed",	   "rolled_back"};

struct request {
	const struct json *j;
	const char *op;
	char *err;
};

/* Field accessors: each failure names the op and the field. */
static int field_str(struct request *r, const char *key, bool required, const char **out)
{
	const struct json *f = json_get(r->j, key);

	*out = NULL;
	if (!f)
		return required ? xrtd_errf(r->err, EINVAL, "%s: missing field '%s'", r->op, key)
				: 0;
	if (f->type != JSON_STRING)
		return xrtd_errf(r->err, EINVAL, "%s: field '%s' must be a string, not %s", r->op,
				 key, json_type_name(f->type));
	*out = f->s;
	return 0;
}

static int field_int(struct request *r, const char *key, bool *present, int64_t *out)
{
	const struct json *f = json_get(r->j, key);

	*present = f != NULL;
	if (!f)
		return 0;
	if (f->type != JSON_INT)
		return xrtd_errf(r->err, EINVAL, "%s: field '%s' must be an integer, not %s", r->op,
				 key, json_type_name(f->type));
	*out = f->i;
	return 0;
}

static int field_names(struct request *r, const struct json **out)
{
	const struct json *f = json_get(r->j, "names");

	*out = NULL;
	if (!f)
		return 0;
	if (f->type != JSON_ARRAY)
		return xrtd_errf(r->err, EINVAL, "%s: field 'names' must be a list of knob names",
				 r->op);
	for (const struct json *n = f->child; n; n = n->next) {
		if (n->type != JSON_STRING)
			return xrtd_errf(r->err, EINVAL, "%s: 'names' holds a %s, not a name",
					 r->op, json_type_name(n->type));
		if (!knob_find(n->s))
			return xrtd_errf(r->err, ENOENT, "%s: unknown knob '%s'", r->op, n->s);
	}
	*out = f;
	return 0;
}

static bool named(const struct json *names, const struct xrtd_knob *k)
{
	if (!names)
		return true;
	for (const struct json *n = names->child; n; n = n->next)
		if (!strcmp(n->s, k->name))
			return true;
	return false;
}

static int find_knob(struct request *r, struct xrtd_knob **k)
{
	const char *name;
	int ret = field_str(r, "name", true, &name);

	if (ret)
		return ret;
	*k = knob_find(name);
	if (!*k)
		return xrtd_errf(r->err, ENOENT, "%s: unknown knob '%s'", r->op, name);
	return 0;
}

static void knob_json(struct jbuf *b, const struct xrtd_knob *k)
{
	char text[XRTD_ENUM_LEN + 32];
	uint32_t state = __atomic_load_n(&k->shared->state, __ATOMIC_RELAXED);

	xrtd_knob_format(k, k->applied, text, sizeof(text));
	jb_printf(b, "{\"name\":");
	jb_str(b, k->name);
	jb_printf(b, ",\"backend\":");
	jb_str(b, k->backend->name);
	jb_printf(b, ",\"target\":");
	jb_str(b, k->target);
	jb_printf(b, ",\"netns\":");
	jb_str(b, k->netns);
	jb_printf(b,
		  ",\"slot\":%d,\"type\":\"%s\",\"min\":%" PRId64 ",\"max\":%" PRId64
		  ",\"step\":%" PRId64 ",\"enum\":[",
		  k->slot, k->type == XT_KNOB_ENUM ? "enum" : "int", k->min, k->max, k->step);
	for (int i = 0; i < k->enum_count; i++) {
		jb_printf(b, i ? "," : "");
		jb_str(b, k->enum_values[i]);
	}
	jb_printf(b,
		  "],\"original\":%" PRId64 ",\"applied\":%" PRId64 ",\"good\":%" PRId64
		  ",\"text\":",
		  k->original, k->applied, k->good);
	jb_str(b, text);
	jb_printf(b, ",\"state\":\"%s\",\"armed\":%s,\"kept\":%s}",
		  state < sizeof(state_names) / sizeof(state_names[0]) ? state_names[state] : "?",
		  k->armed ? "true" : "false", k->kept ? "true" : "false");
}

static void knobs_json(struct jbuf *b, const struct json *names)
{
	bool first = true;

	jb_printf(b, ",\"knobs\":[");
	for (int i = 0; i < XT_KNOB_MAX; i++) {
		if (!xrtd.knobs[i] || !named(names, xrtd.knobs[i]))
			continue;
		jb_printf(b, first ? "" : ",");
		knob_json(b, xrtd.knobs[i]);
		first = false;
	}
	jb_printf(b, "]");
}

/* A value given as an integer, or for enum knobs as one of its strings. */
static int value_of(struct request *r, const struct xrtd_knob *k, int64_t *value)
{
	const struct json *v = json_get(r->j, "value");

	if (!v)
		return xrtd_errf(r->err, EINVAL, "%s %s: missing field 'value'", r->op, k->name);
	if (v->type == JSON_INT) {
		*value = v->i;
		return 0;
	}
	if (v->type == JSON_STRING && k->type == XT_KNOB_ENUM) {
		for (int i = 0; i < k->enum_count; i++)
			if (!strcmp(k->enum_values[i], v->s)) {
				*value = i;
				return 0;
			}
		return xrtd_errf(r->err, EINVAL, "%s %s: '%s' is not one of the knob's enum values",
				 r->op, k->name, v->s);
	}
	return xrtd_errf(r->err, EINVAL, "%s %s: field 'value' must be %s, not %s", r->op, k->name,
			 k->type == XT_KNOB_ENUM ? "an index or an enum string" : "an integer",
			 json_type_name(v->type));
}

static int op_register(struct client *c, struct request *r, struct jbuf *out)
{
	struct knob_spec spec = {0};
	const struct json *en = json_get(r->j, "enum");
	struct xrtd_knob *k;
	bool has_step;
	int ret;

	(void)c;
	if ((ret = field_str(r, "name", true, &spec.name)) ||
	    (ret = field_str(r, "backend", true, &spec.backend)) ||
	    (ret = field_str(r, "target", true, &spec.target)) ||
	    (ret = field_str(r, "netns", false, &spec.netns)) ||
	    (ret = field_int(r, "min", &spec.has_min, &spec.min)) ||
	    (ret = field_int(r, "max", &spec.has_max, &spec.max)) ||
	    (ret = field_int(r, "step", &has_step, &spec.step)))
		return ret;
	if (en) {
		if (en->type != JSON_ARRAY)
			return xrtd_errf(r->err, EINVAL,
					 "register: field 'enum' must be a list of "
					 "strings");
		for (const struct json *v = en->child; v; v = v->next) {
			if (v->type != JSON_STRING)
				return xrtd_errf(r->err, EINVAL,
						 "register: 'enum' holds a %s, not a "
						 "string",
						 json_type_name(v->type));
			if (spec.enum_count == XRTD_ENUM_MAX)
				return xrtd_errf(r->err, E2BIG,
						 "register: more than %d enum values",
						 XRTD_ENUM_MAX);
			spec.enum_values[spec.enum_count++] = v->s;
		}
		if (!spec.enum_count)
			return xrtd_errf(r->err, EINVAL, "register: 'enum' is empty");
	}
	ret = knob_register(&spec, &k, r->err);
	if (ret)
		return ret;
	jb_printf(out, ",\"knob\":");
	knob_json(out, k);
	return 0;
}

static int op_unregister(struct client *c, struct request *r, struct jbuf *out)
{
	struct xrtd_knob *k;
	int ret = find_knob(r, &k);

	(void)c;
	if (ret)
		return ret;
	jb_printf(out, ",\"knob\":{\"name\":");
	jb_str(out, k->name);
	jb_printf(out, ",\"state\":\"unregistered\"}");
	return knob_unregister(k, r->err);
}

static int op_set(struct client *c, struct request *r, struct jbuf *out)
{
	struct xrtd_knob *k;
	const char *reason;
	int64_t value = 0;
	int ret;

	if ((ret = find_knob(r, &k)) || (ret = value_of(r, k, &value)) ||
	    (ret = field_str(r, "reason", false, &reason)))
		return ret;
	if (c->txn.id) {
		struct txn_set *s = NULL;

		ret = knob_check(k, value, r->err);
		if (ret)
			return ret;
		for (int i = 0; i < c->txn.count && !s; i++)
			if (c->txn.sets[i].slot == k->slot)
				s = &c->txn.sets[i];
		if (!s)
			s = &c->txn.sets[c->txn.count++];
		*s = (struct txn_set){
			.slot = k->slot, .reg_gen = k->shared->reg_gen, .value = value};
		snprintf(s->reason, sizeof(s->reason), "%s", reason ? reason : "");
		jb_printf(out, ",\"queued\":true,\"txn\":%" PRIu64, c->txn.id);
		return 0;
	}
	ret = knob_set(k, value, reason, "socket", r->err);
	if (ret)
		return ret;
	jb_printf(out, ",\"knob\":");
	knob_json(out, k);
	return 0;
}

static int op_get(struct client *c, struct request *r, struct jbuf *out)
{
	struct xrtd_knob *k;
	int ret = find_knob(r, &k);

	(void)c;
	if (ret)
		return ret;
	jb_printf(out, ",\"knob\":");
	knob_json(out, k);
	return 0;
}

static int op_list(struct client *c, struct request *r, struct jbuf *out)
{
	(void)c;
	(void)r;
	knobs_json(out, NULL);
	return 0;
}

static int op_begin(struct client *c, struct request *r, struct jbuf *out)
{
	if (c->txn.id)
		return xrtd_errf(r->err, EBUSY, "begin: transaction %" PRIu64 " is already open",
				 c->txn.id);
	c->txn.id = next_txn++;
	c->txn.count = 0;
	jb_printf(out, ",\"txn\":%" PRIu64, c->txn.id);
	return 0;
}

static int op_commit(struct client *c, struct request *r, struct jbuf *out)
{
	int ret;

	if (!c->txn.id)
		return xrtd_errf(r->err, EINVAL,
				 "commit: no transaction is open (send begin first)");
	ret = txn_commit(&c->txn, r->err);
	c->txn.id = 0;
	if (ret)
		return ret;
	jb_printf(out, ",\"knobs\":[");
	for (int i = 0; i < c->txn.count; i++) {
		jb_printf(out, i ? "," : "");
		knob_json(out, xrtd.knobs[c->txn.sets[i].slot]);
	}
	jb_printf(out, "]");
	return 0;
}

static int op_abort(struct client *c, struct request *r, struct jbuf *out)
{
	(void)out;
	if (!c->txn.id)
		return xrtd_errf(r->err, EINVAL, "abort: no transaction is open");
	c->txn.id = 0;
	return 0;
}

static int op_rollback(struct client *c, struct request *r, struct jbuf *out)
{
	const char *to, *reason;
	const struct json *names;
	bool to_good;
	int ret;

	(void)c;
	if ((ret = field_str(r, "to", false, &to)) ||
	    (ret = field_str(r, "reason", false, &reason)) || (ret = field_names(r, &names)))
		return ret;
	if (to && strcmp(to, "original") && strcmp(to, "good"))
		return xrtd_errf(r->err, EINVAL,
				 "rollback: 'to' must be 'original' or 'good', not "
				 "'%s'",
				 to);
	to_good = to && !strcmp(to, "good");
	for (int i = XT_KNOB_MAX - 1; i >= 0; i--) {
		struct xrtd_knob *k = xrtd.knobs[i];

		if (!k || !named(names, k))
			continue;
		ret = knob_revert(k, to_good ? k->good : k->original,
				  reason && *reason ? reason : "rollback requested", r->err);
		if (ret)
			return ret;
	}
	knobs_json(out, names);
	return 0;
}

static int op_mark(struct client *c, struct request *r, struct jbuf *out, bool keep)
{
	const struct json *names;
	int ret = field_names(r, &names);

	(void)c;
	if (ret)
		return ret;
	for (int i = 0; i < XT_KNOB_MAX; i++) {
		struct xrtd_knob *k = xrtd.knobs[i];

		if (!k || !named(names, k))
			continue;
		k->good = k->applied;
		if (keep && k->armed && !k->kept) {
			ret = journal_keep(k);
			if (ret)
				return xrtd_errf(r->err, -ret, "keep %s: journal write failed",
						 k->name);
			k->kept = true;
		}
	}
	knobs_json(out, names);
	return 0;
}

static int op_good(struct client *c, struct request *r, struct jbuf *out)
{
	return op_mark(c, r, out, false);
}

static int op_keep(struct client *c, struct request *r, struct jbuf *out)
{
	return op_mark(c, r, out, true);
}

static int op_heartbeat(struct client *c, struct request *r, struct jbuf *out)
{
	int64_t lease_ms = LEASE_MS_DEFAULT;
	bool given;
	int ret = field_int(r, "lease_ms", &given, &lease_ms);

	(void)c;
	if (ret)
		return ret;
	if (lease_ms < 1 || lease_ms > LEASE_MS_MAX)
		return xrtd_errf(r->err, ERANGE, "heartbeat: lease_ms %" PRId64 " out of 1..%d",
				 lease_ms, LEASE_MS_MAX);
	xrtd.lease_held = true;
	xrtd.lease_deadline_ns = now_ns() + (uint64_t)lease_ms * 1000000;
	__atomic_store_n(&xrtd.table->lease_deadline_ns, xrtd.lease_deadline_ns, __ATOMIC_RELEASE);
	jb_printf(out, ",\"deadline_ms\":%" PRId64, lease_ms);
	return 0;
}

static int op_release(struct client *c, struct request *r, struct jbuf *out)
{
	(void)c;
	(void)r;
	(void)out;
	xrtd.lease_held = false;
	xrtd.lease_deadline_ns = 0;
	__atomic_store_n(&xrtd.table->lease_deadline_ns, 0, __ATOMIC_RELEASE);
	return 0;
}

static int op_status(struct client *c, struct request *r, struct jbuf *out)
{
	const struct xrtd_counters *n = &xrtd.counters;
	int count = 0;
	int64_t remaining = 0;

	(void)c;
	(void)r;
	for (int i = 0; i < XT_KNOB_MAX; i++)
		count += xrtd.knobs[i] != NULL;
	if (xrtd.lease_held)
		remaining = ((int64_t)xrtd.lease_deadline_ns - (int64_t)now_ns()) / 1000000;
	jb_printf(out, ",\"pid\":%d,\"shm\":", getpid());
	jb_str(out, xrtd.opt.shm_name);
	jb_printf(out, ",\"socket\":");
	jb_str(out, xrtd.opt.socket_path);
	jb_printf(out, ",\"journal\":");
	jb_str(out, journal_path());
	jb_printf(out, ",\"audit\":");
	jb_str(out, audit_path());
	jb_printf(out,
		  ",\"knobs\":%d,\"lease\":{\"held\":%s,\"remaining_ms\":%" PRId64
		  ",\"expiries\":%" PRIu64 ",\"action\":\"%s\"},\"counters\":{\"requests\":%" PRIu64
		  ",\"request_errors\":%" PRIu64 ",\"applied\":%" PRIu64 ",\"refused\":%" PRIu64
		  ",\"failed\":%" PRIu64 ",\"restored\":%" PRIu64 "}",
		  count, xrtd.lease_held ? "true" : "false", remaining, n->lease_expiries,
		  xrtd.opt.lease_action == LEASE_TO_GOOD ? "good" : "original", n->requests,
		  n->request_errors, n->applied, n->refused, n->failed, n->restored);
	return 0;
}

struct op {
	const char *name;
	int (*fn)(struct client *c, struct request *r, struct jbuf *out);
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

static int dispatch(struct client *c, const char *line, size_t len, struct jbuf *out,
		    char err[XRTD_ERR_LEN])
{
	struct request r = {.err = err};
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
	pthread_mutex_lock(&xrtd.lock);
	ret = op->fn(c, &r, out);
	pthread_mutex_unlock(&xrtd.lock);
out:
	json_free(j);
	return ret;
}

/* Answer one request line; false when the reply could not be sent (the client is dropped). */
static bool reply(struct client *c, const char *line, size_t len)
{
	char err[XRTD_ERR_LEN] = "";
	struct jbuf body = {0}, msg = {0};
	bool sent;
	int ret;

	xrtd.counters.requests++;
	ret = dispatch(c, line, len, &body, err);
	if (ret) {
		xrtd.counters.request_errors++;
		jb_printf(&msg, "{\"ok\":false,\"error\":");
		jb_str(&msg, err[0] ? err : strerror(-ret));
		jb_printf(&msg, "}\n");
	} else {
		jb_printf(&msg, "{\"ok\":true%.*s}\n", (int)body.len, body.p ? body.p : "");
	}
	/* Never block on a client that does not read: the lease must be checked on time. */
	sent = send(c->fd, msg.p, msg.len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)msg.len;
	jb_free(&body);
	jb_free(&msg);
	return sent;
}

static void client_close(int i)
{
	/* A client that goes away mid-transaction leaves nothing half-applied: sets were queued. */
	close(clients[i]->fd);
	free(clients[i]);
	clients[i] = NULL;
}

/* Read what is there; answer every complete line. Returns false when the client is gone. */
static bool client_read(struct client *c)
{
	ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
	char *start = c->buf, *nl;

	if (n <= 0)
		return false;
	c->len += n;
	while ((nl = memchr(start, '\n', c->buf + c->len - start))) {
		char *end = nl;

		if (end > start && end[-1] == '\r')
			end--;
		*end = 0;
		if (!reply(c, start, end - start))
			return false;
		start = nl + 1;
	}
	c->len -= start - c->buf;
	memmove(c->buf, start, c->len);
	if (c->len == sizeof(c->buf)) {
		const char *msg =
			"{\"ok\":false,\"error\":\"request line longer than 65536 bytes\"}\n";

		send(c->fd, msg, strlen(msg), MSG_NOSIGNAL);
		return false;
	}
	return true;
}

int control_listen(const char *path, char err[XRTD_ERR_LEN])
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	sigset_t mask;
	mode_t old;

	if (strlen(path) >= sizeof(addr.sun_path))
		return xrtd_errf(err, ENAMETOOLONG, "--socket %s: path too long", path);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0)
		return xrtd_errf(err, errno, "socket: %s", strerror(errno));
	unlink(path);
	old = umask(0177); /* the socket is born 0600 */
	if (bind(listen_fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(listen_fd, 16)) {
		int e = errno;

		umask(old);
		return xrtd_errf(err, e, "--socket %s: %s", path, strerror(e));
	}
	umask(old);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (signal_fd < 0)
		return xrtd_errf(err, errno, "signalfd: %s", strerror(errno));
	return 0;
}

int control_run(void)
{
	struct pollfd pfd[CLIENT_MAX + 2];
	int idx[CLIENT_MAX + 2];

	while (!xrtd.stop) {
		int n = 0;

		pfd[n++] = (struct pollfd){.fd = signal_fd, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
		for (int i = 0; i < CLIENT_MAX; i++)
			if (clients[i]) {
				idx[n] = i;
				pfd[n++] = (struct pollfd){.fd = clients[i]->fd, .events = POLLIN};
			}
		/* 10 ms: the lease is checked at least this often. */
		if (poll(pfd, n, 10) < 0 && errno != EINTR)
			return -errno;
		pthread_mutex_lock(&xrtd.lock);
		lease_check();
		pthread_mutex_unlock(&xrtd.lock);
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(signal_fd, &si, sizeof(si)) == sizeof(si))
				fprintf(stderr, "xrtd: signal %u, restoring and exiting\n",
					si.ssi_signo);
			xrtd.stop = 1;
			break;
		}
		if (pfd[1].revents & POLLIN) {
			int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC), slot = -1;

			for (int i = 0; i < CLIENT_MAX && slot < 0 && fd >= 0; i++)
				if (!clients[i])
					slot = i;
			if (fd >= 0 && slot < 0) {
				close(fd); /* full: the client sees EOF and may retry */
			} else if (fd >= 0) {
				clients[slot] = calloc(1, sizeof(struct client));
				if (!clients[slot])
					abort();
				clients[slot]->fd = fd;
			}
		}
		for (int p = 2; p < n; p++)
			if (pfd[p].revents && clients[idx[p]] && !client_read(clients[idx[p]]))
				client_close(idx[p]);
	}
	return 0;
}

void control_close(void)
{
	for (int i = 0; i < CLIENT_MAX; i++)
		if (clients[i])
			client_close(i);
	if (listen_fd >= 0) {
		close(listen_fd);
		unlink(xrtd.opt.socket_path);
	}
	if (signal_fd >= 0)
		close(signal_fd);
}
