// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define JSON_MAX_DEPTH 16

struct parser {
	const char *start, *p;
	char *err;
	size_t errlen;
	int depth;
};

static struct json *fail(struct parser *ps, const char *what)
{
	if (!ps->err[0])
		snprintf(ps->err, ps->errlen, "malformed JSON at byte %zu: %s",
			 (size_t)(ps->p - ps->start), what);
	return NULL;
}

static void skip_ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
		ps->p++;
}

static struct json *node(enum json_type t)
{
	struct json *j = calloc(1, sizeof(*j));

	if (!j)
		abort();
	j->type = t;
	return j;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static char *parse_string(struct parser *ps)
{
	size_t cap = 32, n = 0;
	char *out = malloc(cap);

	ps->p++; /* opening quote */
	for (;;) {
		unsigned char c = *ps->p;
		unsigned cp;

		if (n + 4 >= cap)
			out = realloc(out, cap *= 2);
		if (!out)
			abort();
		if (c == '"') {
			ps->p++;
			out[n] = 0;
			return out;
		}
		if (c < 0x20) {
			fail(ps, c ? "control character in string" : "unterminated string");
			free(out);
			return NULL;
		}
		if (c != '\\') {
			out[n++] = c;
			ps->p++;
			continue;
		}
		ps->p++;
		switch (*ps->p) {
		case '"':
		case '\\':
		case '/':
			out[n++] = *ps->p;
			break;
		case 'n':
			out[n++] = '\n';
			break;
		case 't':
			out[n++] = '\t';
			break;
		case 'r':
			out[n++] = '\r';
			break;
		case 'b':
			out[n++] = '\b';
			break;
		case 'f':
			out[n++] = '\f';
			break;
		case 'u':
			cp = 0;
			for (int k = 1; k <= 4; k++) {
				int h = hexval(ps->p[k]);

				if (h < 0) {
					fail(ps, "bad \\u escape");
					free(out);
					return NULL;
				}
				cp = cp * 16 + h;
			}
			ps->p += 4;
			if (cp == 0 || cp >= 0xd800) { /* NUL and surrogates: not needed, refused */
				fail(ps, "unsupported \\u escape");
				free(out);
				return NULL;
			}
			if (cp < 0x80) {
				out[n++] = cp;
			} else if (cp < 0x800) {
				out[n++] = 0xc0 | (cp >> 6);
				out[n++] = 0x80 | (cp & 0x3f);
			} else {
				out[n++] = 0xe0 | (cp >> 12);
				out[n++] = 0x80 | ((cp >> 6) & 0x3f);
				out[n++] = 0x80 | (cp & 0x3f);
			}
			break;
		default:
			fail(ps, "bad escape in string");
			free(out);
			return NULL;
		}
		ps->p++;
	}
}

static struct json *parse_value(struct parser *ps);

static struct json *parse_number(struct parser *ps)
{
	const char *s = ps->p;
	char *end;
	struct json *j;

	if (*s == '-')
		s++;
	if (*s < '0' || *s > '9')
		return fail(ps, "unexpected character");
	while (*s >= '0' && *s <= '9')
		s++;
	if (*s == '.' || *s == 'e' || *s == 'E') {
		strtod(ps->p, &end);
		ps->p = end;
		return node(JSON_FLOAT);
	}
	errno = 0;
	j = node(JSON_INT);
	j->i = strtoll(ps->p, &end, 10);
	if (errno == ERANGE) {
		free(j);
		return fail(ps, "integer out of 64-bit range");
	}
	ps->p = end;
	return j;
}

static struct json *parse_container(struct parser *ps, bool object)
{
	struct json *j = node(object ? JSON_OBJECT : JSON_ARRAY), **tail = &j->child;
	char close = object ? '}' : ']';

	if (++ps->depth > JSON_MAX_DEPTH) {
		json_free(j);
		return fail(ps, "nested too deeply");
	}
	ps->p++;
	skip_ws(ps);
	if (*ps->p == close) {
		ps->p++;
		ps->depth--;
		return j;
	}
	for (;;) {
		char *key = NULL;
		struct json *v;

		skip_ws(ps);
		if (object) {
			if (*ps->p != '"') {
				json_free(j);
				return fail(ps, "expected a member name");
			}
			key = parse_string(ps);
			if (!key) {
				json_free(j);
				return NULL;
			}
			skip_ws(ps);
			if (*ps->p != ':') {
				free(key);
				json_free(j);
				return fail(ps, "expected ':'");
			}
			ps->p++;
		}
		v = parse_value(ps);
		if (!v) {
			free(key);
			json_free(j);
			return NULL;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		skip_ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == close) {
			ps->p++;
			ps->depth--;
			return j;
		}
		json_free(j);
		return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static struct json *parse_value(struct parser *ps)
{
	struct json *j;

	skip_ws(ps);
	switch (*ps->p) {
	case '{':
		return parse_container(ps, true);
	case '[':
		return parse_container(ps, false);
	case '"':
		j = node(JSON_STRING);
		j->s = parse_string(ps);
		if (!j->s) {
			free(j);
			return NULL;
		}
		return j;
	case 't':
	case 'f':
	case 'n':
		if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "null", 4)) {
			j = node(*ps->p == 'n' ? JSON_NULL : JSON_BOOL);
			j->b = *ps->p == 't';
			ps->p += 4;
			return j;
		}
		if (!strncmp(ps->p, "false", 5)) {
			ps->p += 5;
			return node(JSON_BOOL);
		}
		return fail(ps, "unexpected word");
	case 0:
		return fail(ps, "unexpected end of input");
	default:
		return parse_number(ps);
	}
}

struct json *json_parse(const char *text, char *err, size_t errlen)
{
	struct parser ps = {.start = text, .p = text, .err = err, .errlen = errlen};
	struct json *j;

	err[0] = 0;
	j = parse_value(&ps);
	if (!j)
		return NULL;
	skip_ws(&ps);
	if (*ps.p) {
		json_free(j);
		return fail(&ps, "trailing characters after the value");
	}
	return j;
}

void json_free(struct json *j)
{
	while (j) {
		struct json *next = j->next;

		json_free(j->child);
		free(j->key);
		free(j->s);
		free(j);
		j = next;
	}
}

const struct json *json_get(const struct json *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	for (const struct json *m = obj->child; m; m = m->next)
		if (!strcmp(m->key, key))
			return m;
	return NULL;
}

const char *json_type_name(enum json_type t)
{
	static const char *const names[] = {"null",   "boolean", "integer", "number",
					    "string", "array",	 "object"};

	return names[t];
}

void jb_printf(struct jbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < room) {
			b->len += n;
			return;
		}
		b->cap = (b->cap + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
}

void jb_str(struct jbuf *b, const char *s)
{
	jb_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			jb_printf(b, "\\%c", c);
		else if (c == '\n')
			jb_printf(b, "\\n");
		else if (c < 0x20)
			jb_printf(b, "\\u%04x", c);
		else
			jb_printf(b, "%c", c);
	}
	jb_printf(b, "\"");
}

void jb_free(struct jbuf *b)
{
	free(b->p);
	*b = (struct jbuf){0};
}
