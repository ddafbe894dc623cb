// SPDX-License-Identifier: MIT
/*
 * The journal: JSON lines, appended and fdatasync'd before the change each one announces.
 * journal_read() gives back every knob the last run left armed (neither restored nor kept);
 * recovery.c puts them back before journal_start() begins a fresh journal.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "registry.h"

static int journal_fd = -1;
static char path[PATH_MAX];
static const char *state_dir;
static bool sync_all; /* --journal-sync all */

void journal_init(const char *dir, bool sync_every_record)
{
	state_dir = dir;
	sync_all = sync_every_record;
	snprintf(path, sizeof(path), "%s/journal", dir);
}

const char *journal_path(void)
{
	return path;
}

/*
 * One record per write(): it reaches the page cache before the change it announces, so it
 * survives any crash of xrtd. `durable` records are also fdatasync'd, surviving power loss: the
 * arm records always (they hold the originals replay restores), the others with --journal-sync all.
 */
static int append(struct jbuf *b, bool durable)
{
	int ret = 0;

	jb_printf(b, "\n");
	errno = 0;
	if (write(journal_fd, b->p, b->len) != (ssize_t)b->len ||
	    ((durable || sync_all) && fdatasync(journal_fd)))
		ret = -(errno ? errno : EIO);
	jb_free(b);
	return ret;
}

static void knob_identity(struct jbuf *b, const struct xrtd_knob *k)
{
	jb_printf(b, "\"knob\":");
	jb_str(b, k->name);
}

int journal_arm(const struct xrtd_knob *k)
{
	struct jbuf b = {0};

	jb_printf(&b, "{\"op\":\"arm\",");
	knob_identity(&b, k);
	jb_printf(&b, ",\"backend\":");
	jb_str(&b, k->backend->name);
	jb_printf(&b, ",\"target\":");
	jb_str(&b, k->target);
	jb_printf(&b, ",\"netns\":");
	jb_str(&b, k->netns);
	jb_printf(&b, ",\"type\":\"%s\",\"enum\":[", k->type == XT_KNOB_ENUM ? "enum" : "int");
	for (int i = 0; i < k->enum_count; i++) {
		jb_printf(&b, i ? "," : "");
		jb_str(&b, k->enum_values[i]);
	}
	jb_printf(&b, "],\"original\":%" PRId64 "}", k->original);
	return append(&b, true);
}

int journal_set(const struct xrtd_knob *k, int64_t old, int64_t value, uint64_t txn)
{
	struct jbuf b = {0};

	jb_printf(&b, "{\"op\":\"set\",");
	knob_identity(&b, k);
	jb_printf(&b, ",\"old\":%" PRId64 ",\"new\":%" PRId64 ",\"txn\":%" PRIu64 "}", old, value,
		  txn);
	return append(&b, false);
}

static int knob_record(const struct xrtd_knob *k, const char *op)
{
	struct jbuf b = {0};

	jb_printf(&b, "{\"op\":\"%s\",", op);
	knob_identity(&b, k);
	jb_printf(&b, "}");
	return append(&b, false);
}

int journal_restored(const struct xrtd_knob *k)
{
	return knob_record(k, "restored");
}

int journal_keep(const struct xrtd_knob *k)
{
	return knob_record(k, "keep");
}

int journal_txn(uint64_t txn, const char *what)
{
	struct jbuf b = {0};

	jb_printf(&b, "{\"op\":\"txn\",\"txn\":%" PRIu64 ",\"what\":\"%s\"}", txn, what);
	return append(&b, false);
}

static const char *str_field(const struct json *rec, const char *key)
{
	const struct json *f = json_get(rec, key);

	return f && f->type == JSON_STRING ? f->s : NULL;
}

static struct journal_knob *find_entry(struct journal_knob *r, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(r[i].k.name, name))
			return &r[i];
	return NULL;
}

/* Apply one record to the knobs read so far; -1 when it is not a record this journal writes. */
static int read_record(const struct json *rec, struct journal_knob **r, int *n, int *cap)
{
	const char *op = str_field(rec, "op"), *name = str_field(rec, "knob");
	const struct json *orig, *en;
	struct journal_knob *e;

	if (!op)
		return -1;
	if (!strcmp(op, "txn") || !strcmp(op, "start"))
		return 0;
	if (!name)
		return -1;
	e = find_entry(*r, *n, name);
	if (!strcmp(op, "arm")) {
		const char *backend = str_field(rec, "backend"), *target = str_field(rec, "target");
		const char *netns = str_field(rec, "netns"), *type = str_field(rec, "type");

		orig = json_get(rec, "original");
		en = json_get(rec, "enum");
		if (!backend || !target || !netns || !type || !orig || orig->type != JSON_INT ||
		    !en || en->type != JSON_ARRAY || !xrtd_backend_by_name(backend))
			return -1;
		if (!e) {
			if (*n == *cap) {
				*cap = *cap ? *cap * 2 : 16;
				*r = realloc(*r, *cap * sizeof(**r));
				if (!*r)
					abort();
			}
			e = &(*r)[(*n)++];
		}
		memset(e, 0, sizeof(*e));
		snprintf(e->k.name, sizeof(e->k.name), "%s", name);
		snprintf(e->k.target, sizeof(e->k.target), "%s", target);
		snprintf(e->k.netns, sizeof(e->k.netns), "%s", netns);
		e->k.backend = xrtd_backend_by_name(backend);
		e->k.type = strcmp(type, "enum") ? XT_KNOB_INT : XT_KNOB_ENUM;
		for (const struct json *v = en->child; v && e->k.enum_count < XRTD_ENUM_MAX;
		     v = v->next)
			if (v->type == JSON_STRING)
				snprintf(e->k.enum_values[e->k.enum_count++], XRTD_ENUM_LEN, "%s",
					 v->s);
		e->k.original = orig->i;
		e->armed = true;
		return 0;
	}
	if (!e)
		return -1;
	if (!strcmp(op, "set"))
		e->armed = true;
	else if (!strcmp(op, "restored") || !strcmp(op, "keep"))
		e->armed = false;
	else
		return -1;
	return 0;
}

int journal_read(struct journal_knob **out, int *count, char err[XRTD_ERR_LEN])
{
	struct journal_knob *r = NULL;
	int n = 0, cap = 0, lineno = 0, bad = 0;
	char *text = NULL, *line, *nl;
	size_t size = 0;
	FILE *f = fopen(path, "r");

	*out = NULL;
	*count = 0;
	if (!f)
		return errno == ENOENT ? 0 : xrtd_errf(err, errno, "%s: %s", path, strerror(errno));
	if (getdelim(&text, &size, 0, f) < 0 && ferror(f)) {
		fclose(f);
		free(text);
		return xrtd_errf(err, EIO, "%s: read failed", path);
	}
	fclose(f);
	for (line = text; line && *line; line = nl) {
		char perr[XRTD_ERR_LEN];
		struct json *rec;

		nl = strchr(line, '\n');
		lineno++;
		if (!nl) { /* torn last line: its change was never applied */
			fprintf(stderr, "xrtd: journal line %d is torn, ignored\n", lineno);
			break;
		}
		*nl++ = 0;
		rec = json_parse(line, perr, sizeof(perr));
		if (!rec || read_record(rec, &r, &n, &cap)) {
			fprintf(stderr, "xrtd: %s:%d: not a journal record, skipped\n", path,
				lineno);
			bad++;
		}
		json_free(rec);
	}
	free(text);
	*out = r;
	*count = n;
	return bad;
}

/* Start a fresh journal (temp + rename): after replay nothing in the old one is pending. */
static int rewrite(char err[XRTD_ERR_LEN])
{
	char tmp[PATH_MAX + 8];
	struct jbuf b = {0};
	int fd, dfd;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return xrtd_errf(err, errno, "%s: %s", tmp, strerror(errno));
	jb_printf(&b, "{\"op\":\"start\",\"pid\":%d}\n", getpid());
	if (write(fd, b.p, b.len) != (ssize_t)b.len || fsync(fd) || rename(tmp, path)) {
		int e = errno;

		jb_free(&b);
		close(fd);
		return xrtd_errf(err, e, "%s: %s", tmp, strerror(e));
	}
	jb_free(&b);
	close(fd);
	dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int journal_start(char err[XRTD_ERR_LEN])
{
	int ret = rewrite(err);

	if (ret)
		return ret;
	journal_fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (journal_fd < 0)
		return xrtd_errf(err, errno, "%s: %s", path, strerror(errno));
	return 0;
}

void journal_close(void)
{
	if (journal_fd >= 0)
		close(journal_fd);
	journal_fd = -1;
}
