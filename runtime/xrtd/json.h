/* SPDX-License-Identifier: MIT */
/* Just enough JSON for the control protocol and the journal: a strict parser and a writer. */
#ifndef XRTD_JSON_H
#define XRTD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_INT, JSON_FLOAT, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
	enum json_type type;
	char *key; /* member name inside an object */
	bool b;
	int64_t i;
	char *s;
	struct json *child; /* first element/member */
	struct json *next;  /* next sibling */
};

/* Parse one JSON value (the whole text); NULL with a message naming the position on error. */
struct json *json_parse(const char *text, char *err, size_t errlen);
void json_free(struct json *j);
const struct json *json_get(const struct json *obj, const char *key);
const char *json_type_name(enum json_type t);

/* A growing output buffer. */
struct jbuf {
	char *p;
	size_t len, cap;
};

void jb_printf(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal, escaped. */
void jb_str(struct jbuf *b, const char *s);
void jb_free(struct jbuf *b);

#endif /* XRTD_JSON_H */
