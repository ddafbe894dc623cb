// SPDX-License-Identifier: MIT
/*
 * Plan and state files: one record per line, space-separated, hex for bytes and addresses.
 * Plan lines: "knobs PATH SIZE", "load_vaddr VADDR", "binary BUILD_ID SHA256" (either "-" when
 * unknown: a binary linked without a build id is identified by the SHA-256 of its file),
 * "library NAME" (the spans are in this shared library, found by the binary line's build id),
 * "const NAME ORIGINAL [MIN MAX MULTIPLE_OF POW2]" (MIN/MAX "-" when not validated), "span ...",
 * "returns_in_safe N" (how many return addresses lie inside the safe spans; unknown if absent).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sie.h"

static int hex_bytes(const char *s, uint8_t *out, int max)
{
	int n = 0;
	size_t len = strlen(s);

	if (len % 2 || len / 2 > (size_t)max)
		return -1;
	for (; *s; s += 2) {
		unsigned int b;

		if (sscanf(s, "%2x", &b) != 1)
			return -1;
		out[n++] = (uint8_t)b;
	}
	return n;
}

/*
 * span NAME SLOT VADDR jump|int3 EXPECTED TRAMP NRELOC {knob|rel32 OFF TARGET}... NSAFE {S E}...
 */
static int parse_span(char *line, struct sie_span *sp)
{
	char *save = NULL, *tok;
	int i;

#define NEXT() (tok = strtok_r(NULL, " \n", &save))
	strtok_r(line, " \n", &save);
	if (!NEXT() || strlen(tok) >= sizeof(sp->name))
		return -1;
	strcpy(sp->name, tok);
	if (!NEXT())
		return -1;
	sp->slot = atoi(tok);
	if (!NEXT())
		return -1;
	sp->vaddr = strtoull(tok, NULL, 16);
	if (!NEXT())
		return -1;
	sp->patch = strcmp(tok, "int3") ? SIE_PATCH_JUMP : SIE_PATCH_INT3;
	if (!NEXT() || (sp->len = hex_bytes(tok, sp->expected, SIE_MAX_BYTES)) <= 0)
		return -1;
	if (!NEXT() || (sp->tramp_len = hex_bytes(tok, sp->tramp, SIE_MAX_BYTES - 8)) <= 0)
		return -1;
	if (!NEXT() || (sp->nrelocs = atoi(tok)) < 0 || sp->nrelocs > SIE_MAX_RELOCS)
		return -1;
	for (i = 0; i < sp->nrelocs; i++) {
		struct sie_reloc_ent *r = &sp->relocs[i];

		if (!NEXT())
			return -1;
		r->kind = strcmp(tok, "knob") ? SIE_RELOC_REL32 : SIE_RELOC_KNOB;
		if (!NEXT())
			return -1;
		r->offset = (uint32_t)atoi(tok);
		if (!NEXT())
			return -1;
		r->target = strtoull(tok, NULL, 16);
		if (r->offset + (r->kind == SIE_RELOC_KNOB ? 8 : 4) > (uint32_t)sp->tramp_len)
			return -1;
	}
	if (!NEXT() || (sp->nsafe = atoi(tok)) < 1 || sp->nsafe > SIE_MAX_SAFE)
		return -1;
	for (i = 0; i < sp->nsafe; i++) {
		if (!NEXT())
			return -1;
		sp->safe[i][0] = strtoull(tok, NULL, 16);
		if (!NEXT())
			return -1;
		sp->safe[i][1] = strtoull(tok, NULL, 16);
	}
	if (sp->patch == SIE_PATCH_JUMP && sp->len < 5)
		return -1;
	return 0;
#undef NEXT
}

static int parse_bound(const char *tok, int64_t none, int64_t *out)
{
	char *end;

	if (!strcmp(tok, "-")) {
		*out = none;
		return 0;
	}
	errno = 0;
	*out = strtoll(tok, &end, 10);
	return errno || *end ? -1 : 0;
}

/* const NAME ORIGINAL [MIN MAX MULTIPLE_OF POW2] */
static int parse_const(const char *line, struct sie_const *c)
{
	char lo[32], hi[32];
	long long orig, mult = 1;
	int pow2 = 0, n;

	memset(c, 0, sizeof(*c));
	n = sscanf(line, "const %63s %lld %31s %31s %lld %d", c->name, &orig, lo, hi, &mult, &pow2);
	if (n != 2 && n != 6)
		return -1;
	c->original = orig;
	c->min = INT64_MIN;
	c->max = INT64_MAX;
	c->multiple_of = mult;
	c->power_of_two = pow2;
	if (n == 6 && (parse_bound(lo, INT64_MIN, &c->min) || parse_bound(hi, INT64_MAX, &c->max) ||
		       mult < 1 || (pow2 != 0 && pow2 != 1) || c->min > c->max))
		return -1;
	return 0;
}

int sie_value_check(const struct sie_const *c, int64_t v, char err[SIE_ERR_LEN])
{
	const char *why = NULL;

	if (v < c->min)
		why = "below the range the analysis holds for";
	else if (v > c->max)
		why = "above the range the analysis holds for";
	else if (v % c->multiple_of)
		why = "not a multiple of the analysis's divisor";
	else if (c->power_of_two && (v <= 0 || (v & (v - 1))))
		why = "not a power of two";
	if (!why)
		return 0;
	snprintf(err, SIE_ERR_LEN,
		 "refused: %s = %lld is %s (range [%lld, %lld], multiple of %lld%s); the value in "
		 "effect is unchanged",
		 c->name, (long long)v, why, (long long)c->min, (long long)c->max,
		 (long long)c->multiple_of, c->power_of_two ? ", power of two" : "");
	return -1;
}

int sie_plan_read(const char *path, struct sie_plan *p, char err[SIE_ERR_LEN])
{
	char line[8192];
	int lineno = 0;
	FILE *f = fopen(path, "r");

	memset(p, 0, sizeof(*p));
	p->returns_in_safe = -1;
	if (!f) {
		snprintf(err, SIE_ERR_LEN, "plan %s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strncmp(line, "knobs ", 6)) {
			if (sscanf(line, "knobs %255s %lx", p->knobs, &p->knobs_size) != 2)
				goto bad;
		} else if (!strncmp(line, "load_vaddr ", 11)) {
			p->load_vaddr = strtoull(line + 11, NULL, 16);
		} else if (!strncmp(line, "binary ", 7)) {
			int n = sscanf(line, "binary %128s %64s", p->build_id, p->sha256);

			if (n < 1 || (n == 2 && strcmp(p->sha256, "-") &&
				      (strlen(p->sha256) != 64 ||
				       strspn(p->sha256, "0123456789abcdef") != 64)))
				goto bad;
			if (!strcmp(p->build_id, "-"))
				p->build_id[0] = 0;
			if (!strcmp(p->sha256, "-"))
				p->sha256[0] = 0;
		} else if (!strncmp(line, "library ", 8)) {
			if (sscanf(line, "library %255s", p->library) != 1)
				goto bad;
		} else if (!strncmp(line, "returns_in_safe ", 16)) {
			if (sscanf(line, "returns_in_safe %d", &p->returns_in_safe) != 1 ||
			    p->returns_in_safe < 0)
				goto bad;
		} else if (!strncmp(line, "const ", 6)) {
			if (p->nconsts == SIE_MAX_CONSTS ||
			    parse_const(line, &p->consts[p->nconsts]))
				goto bad;
			p->nconsts++;
		} else if (!strncmp(line, "span ", 5)) {
			if (p->nspans == SIE_MAX_SPANS || parse_span(line, &p->spans[p->nspans]))
				goto bad;
			p->nspans++;
		} else if (line[0] != '#' && line[0] != '\n') {
			goto bad;
		}
	}
	fclose(f);
	if (!p->knobs[0] || !p->nspans) {
		snprintf(err, SIE_ERR_LEN, "plan %s: needs a knobs line and at least one span",
			 path);
		return -1;
	}
	if (p->library[0] && !p->build_id[0]) {
		snprintf(err, SIE_ERR_LEN,
			 "plan %s: library %s needs a `binary` line with its build id (how the "
			 "engine "
			 "finds it in the process)",
			 path, p->library);
		return -1;
	}
	for (int i = 0; i < p->nspans; i++) {
		p->spans[i].cidx = -1;
		for (int k = 0; k < p->nconsts; k++)
			if (!strcmp(p->spans[i].name, p->consts[k].name))
				p->spans[i].cidx = k;
	}
	return 0;
bad:
	fclose(f);
	snprintf(err, SIE_ERR_LEN, "plan %s line %d: malformed", path, lineno);
	return -1;
}

/*
 * The state file as sie_state_write left it: never through a link, a regular file of root's or
 * ours that no one else may write (disarm writes bytes into the process it names). O_NONBLOCK: a
 * FIFO in its place is refused, not waited on.
 */
static FILE *state_open(const char *path, char err[SIE_ERR_LEN])
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	FILE *f;

	if (fd < 0) {
		if (errno == ELOOP)
			snprintf(err, SIE_ERR_LEN,
				 "refused: state %s is a symbolic link: give the path of the file "
				 "the engine wrote",
				 path);
		else
			snprintf(err, SIE_ERR_LEN, "state %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		snprintf(err, SIE_ERR_LEN, "refused: state %s is not a regular file", path);
	else if (st.st_uid != 0 && st.st_uid != geteuid())
		snprintf(err, SIE_ERR_LEN,
			 "refused: state %s is owned by uid %u, neither root nor this engine's "
			 "(uid %u)",
			 path, st.st_uid, geteuid());
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		snprintf(err, SIE_ERR_LEN,
			 "refused: state %s may be written by others (mode %03o; the engine writes "
			 "it 0600)",
			 path, st.st_mode & 0777);
	else if ((f = fdopen(fd, "r")))
		return f;
	else
		snprintf(err, SIE_ERR_LEN, "state %s: %s", path, strerror(errno));
	close(fd);
	return NULL;
}

int sie_state_read(const char *path, struct sie_state *s, char err[SIE_ERR_LEN])
{
	FILE *f = state_open(path, err);
	int n;

	memset(s, 0, sizeof(*s));
	if (!f)
		return -1;
	n = fscanf(f, "pid %d bias %lx tramp %lx %lx knobs %lx %lx server %d start %llu", &s->pid,
		   &s->bias, &s->tramp_addr, &s->tramp_size, &s->knob_addr, &s->knob_size,
		   &s->server, &s->start_time);
	fclose(f);
	if (n != 8) {
		snprintf(err, SIE_ERR_LEN, "state %s: malformed", path);
		return -1;
	}
	return 0;
}

int sie_state_write(const char *path, const struct sie_state *s, char err[SIE_ERR_LEN])
{
	char tmp[SIE_PATH_LEN + 8];
	FILE *f;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* A new file of our own: a link or another's file planted at the temporary name is refused.
	 */
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		if (fd >= 0)
			close(fd);
		snprintf(err, SIE_ERR_LEN, "state %s: %s", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "pid %d bias %lx tramp %lx %lx knobs %lx %lx server %d start %llu\n", s->pid,
		s->bias, s->tramp_addr, s->tramp_size, s->knob_addr, s->knob_size, s->server,
		s->start_time);
	if (fclose(f) || rename(tmp, path)) {
		snprintf(err, SIE_ERR_LEN, "state %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int sie_single_read(const struct sie_plan *p, const struct sie_const *c)
{
	int reads = 0;

	for (int i = 0; i < p->nspans; i++)
		if (!strcmp(p->spans[i].name, c->name))
			for (int k = 0; k < p->spans[i].nrelocs; k++)
				reads += p->spans[i].relocs[k].kind == SIE_RELOC_KNOB;
	return reads == 1;
}
