// SPDX-License-Identifier: MIT
/*
 * Plan and state files: one record per line, space-separated, hex for bytes and addresses.
 * Plan lines: "knobs PATH SIZE", "load_vaddr VADDR", "const NAME ORIGINAL" (for xrtd), "span ...".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int sie_plan_read(const char *path, struct sie_plan *p, char err[SIE_ERR_LEN])
{
	char line[8192];
	int lineno = 0;
	FILE *f = fopen(path, "r");

	memset(p, 0, sizeof(*p));
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
		} else if (!strncmp(line, "span ", 5)) {
			if (p->nspans == SIE_MAX_SPANS || parse_span(line, &p->spans[p->nspans]))
				goto bad;
			p->nspans++;
		} else if (strncmp(line, "const ", 6) && line[0] != '#' && line[0] != '\n') {
			goto bad;
		}
	}
	fclose(f);
	if (!p->knobs[0] || !p->nspans) {
		snprintf(err, SIE_ERR_LEN, "plan %s: needs a knobs line and at least one span",
			 path);
		return -1;
	}
	return 0;
bad:
	fclose(f);
	snprintf(err, SIE_ERR_LEN, "plan %s line %d: malformed", path, lineno);
	return -1;
}

int sie_state_read(const char *path, struct sie_state *s, char err[SIE_ERR_LEN])
{
	FILE *f = fopen(path, "r");
	int n;

	memset(s, 0, sizeof(*s));
	if (!f) {
		snprintf(err, SIE_ERR_LEN, "state %s: %s", path, strerror(errno));
		return -1;
	}
	n = fscanf(f, "pid %d bias %lx tramp %lx %lx knobs %lx %lx server %d", &s->pid, &s->bias,
		   &s->tramp_addr, &s->tramp_size, &s->knob_addr, &s->knob_size, &s->server);
	fclose(f);
	if (n != 7) {
		snprintf(err, SIE_ERR_LEN, "state %s: malformed", path);
		return -1;
	}
	return 0;
}

int sie_state_write(const char *path, const struct sie_state *s, char err[SIE_ERR_LEN])
{
	char tmp[SIE_PATH_LEN + 8];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		snprintf(err, SIE_ERR_LEN, "state %s: %s", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "pid %d bias %lx tramp %lx %lx knobs %lx %lx server %d\n", s->pid, s->bias,
		s->tramp_addr, s->tramp_size, s->knob_addr, s->knob_size, s->server);
	if (fclose(f) || rename(tmp, path)) {
		snprintf(err, SIE_ERR_LEN, "state %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}
