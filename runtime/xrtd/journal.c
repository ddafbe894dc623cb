// SPDX-License-Identifier: MIT
/*
 * The journal: JSON lines, appended and fdatasync'd before the change each one announces.
 * journal_read() gives back every knob of the last run: armed (changed, neither restored nor
 * kept) and registered (not unregistered). recovery.c puts the armed ones back and registers the
 * others again before journal_start() begins a fresh journal holding those registrations.
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
 * arm records always (they hold the originals replay restores) and the rare register and
 * unregister records, the others with --journal-sync all.
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

static void register_record(struct jbuf *b, const struct xrtd_knob *k)
{
	jb_printf(b, "{\"op\":\"register\",");
	knob_identity(b, k);
	knob_json_fields(b, k);
	jb_printf(b, ",\"min\":%" PRId64 ",\"max\":%" PRId64 ",\"step\":%" PRId64 ",\"slot\":%d}",
		  k->min, k->max, k->step, k->slot);
}

/* Registrations are durable like the originals: a restarted xrtd registers them again. */
int journal_register(const struct xrtd_knob *k)
{
	struct jbuf b = {0};

	register_record(&b, k);
	return append(&b, true);
}

int journal_arm(const struct xrtd_knob *k)
{
	struct jbuf b = {0};

	jb_printf(&b, "{\"op\":\"arm\",");
	knob_identity(&b, k);
	knob_json_fields(&b, k);
	jb_printf(&b, ",\"original\":%" PRId64 "}", k->original);
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

static int knob_record(const struct xrtd_knob *k, const char *op, bool durable)
{
	struct jbuf b = {0};

	jb_printf(&b, "{\"op\":\"%s\",", op);
	knob_identity(&b, k);
	jb_printf(&b, "}");
	return append(&b, durable);
}

int journal_unregister(const struct xrtd_knob *k)
{
	return knob_record(k, "unregister", true);
}

int journal_restored(const struct xrtd_knob *k)
{
	return knob_record(k, "restored", false);
}

int journal_keep(const struct xrtd_knob *k)
{
	return knob_record(k, "keep", false);
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

static const struct json *int_field(const struct json *rec, const char *key)
{
	const struct json *f = json_get(rec, key);

	return f && f->type == JSON_INT ? f : NULL;
}

/* The knob's entry, added when it is new. */
static struct journal_knob *entry(struct journal_knob **r, int *n, int *cap, const char *name)
{
	struct journal_knob *e = find_entry(*r, *n, name);

	if (e)
		return e;
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		*r = realloc(*r, *cap * sizeof(**r));
		if (!*r)
			abort();
	}
	e = &(*r)[(*n)++];
	memset(e, 0, sizeof(*e));
	snprintf(e->k.name, sizeof(e->k.name), "%s", name);
	return e;
}

/* The description of an arm or register record; -1 when a field is missing. */
static int read_description(const struct json *rec, struct xrtd_knob *k)
{
	const char *backend = str_field(rec, "backend"), *target = str_field(rec, "target");
	const char *netns = str_field(rec, "netns"), *type = str_field(rec, "type");
	const struct json *en = json_get(rec, "enum");

	if (!backend || !target || !netns || !type || !en || en->type != JSON_ARRAY ||
	    !xrtd_backend_by_name(backend))
		return -1;
	snprintf(k->target, sizeof(k->target), "%s", target);
	snprintf(k->netns, sizeof(k->netns), "%s", netns);
	k->backend = xrtd_backend_by_name(backend);
	k->type = strcmp(type, "enum") ? XT_KNOB_INT : XT_KNOB_ENUM;
	k->enum_count = 0;
	for (const struct json *v = en->child; v && k->enum_count < XRTD_ENUM_MAX; v = v->next)
		if (v->type == JSON_STRING)
			snprintf(k->enum_values[k->enum_count++], XRTD_ENUM_LEN, "%s", v->s);
	return 0;
}

/* Apply one record to the knobs read so far; -1 when it is not a record this journal writes. */
static int read_record(const struct json *rec, struct journal_knob **r, int *n, int *cap)
{
	const char *op = str_field(rec, "op"), *name = str_field(rec, "knob");
	const struct json *orig = int_field(rec, "original"), *min = int_field(rec, "min");
	const struct json *max = int_field(rec, "max"), *step = int_field(rec, "step");
	const struct json *slot = int_field(rec, "slot");
	struct journal_knob *e;

	if (!op)
		return -1;
	if (!strcmp(op, "txn") || !strcmp(op, "start"))
		return 0;
	if (!name || strlen(name) >= XT_KNOB_NAME_LEN)
		return -1;
	/* A bad arm or register record leaves an entry with nothing to restore or register. */
	if (!strcmp(op, "arm")) {
		e = entry(r, n, cap, name);
		if (!orig || read_description(rec, &e->k))
			return -1;
		e->k.original = orig->i;
		e->armed = true;
		return 0;
	}
	if (!strcmp(op, "register")) {
		e = entry(r, n, cap, name);
		if (!min || !max || !step || !slot || read_description(rec, &e->k))
			return -1;
		e->k.min = min->i;
		e->k.max = max->i;
		e->k.step = step->i;
		e->k.slot = (int)slot->i;
		e->registered = true;
		return 0;
	}
	e = find_entry(*r, *n, name);
	if (!e || !e->k.backend)
		return -1;
	if (!strcmp(op, "set"))
		e->armed = true;
	else if (!strcmp(op, "restored") || !strcmp(op, "keep"))
		e->armed = false;
	else if (!strcmp(op, "unregister"))
		e->registered = false;
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

/*
 * Start a fresh journal (temp + rename): after replay nothing in the old one is pending but the
 * registrations, which are written again in one step, so none is lost to a crash in between.
 */
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
	for (int i = 0; i < XT_KNOB_MAX; i++)
		if (knob_at(i)) {
			register_record(&b, knob_at(i));
			jb_printf(&b, "\n");
		}
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
