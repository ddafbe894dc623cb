// SPDX-License-Identifier: MIT
/* Knob values as text: what /proc/sys and /sys files hold, and what the audit log prints. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static int enum_index(const struct xrtd_knob *k, const char *word, size_t len)
{
	for (int i = 0; i < k->enum_count; i++)
		if (strlen(k->enum_values[i]) == len && !strncmp(k->enum_values[i], word, len))
			return i;
	return -1;
}

int xrtd_knob_parse(const struct xrtd_knob *k, const char *text, int64_t *value,
		    char err[XRTD_ERR_LEN])
{
	const char *s = text, *open = strchr(text, '['), *close;
	size_t len;
	char *end;

	if (open) { /* "a [b] c": the selected word */
		close = strchr(open, ']');
		if (!close)
			return xrtd_errf(err, EINVAL, "%s: unbalanced '[' in '%s'", k->target,
					 text);
		s = open + 1;
		len = close - s;
	} else {
		while (*s == ' ' || *s == '\t')
			s++;
		len = strcspn(s, " \t\n");
	}
	if (k->type == XT_KNOB_ENUM) {
		int i = enum_index(k, s, len);

		if (i < 0)
			return xrtd_errf(err, EINVAL,
					 "%s: value '%.*s' is not one of the knob's enum values",
					 k->target, (int)len, s);
		*value = i;
		return 0;
	}
	if (open)
		return xrtd_errf(err, EINVAL,
				 "%s: holds an enum ('%s'); register it with enum values",
				 k->target, text);
	errno = 0;
	*value = strtoll(s, &end, 10);
	if (errno || end == s || end != s + len)
		return xrtd_errf(err, EINVAL, "%s: '%.*s' is not an integer", k->target, (int)len,
				 s);
	return 0;
}

int xrtd_knob_format(const struct xrtd_knob *k, int64_t value, char *buf, size_t len)
{
	if (k->type == XT_KNOB_ENUM) {
		if (value < 0 || value >= k->enum_count)
			return -ERANGE;
		return snprintf(buf, len, "%s", k->enum_values[value]) < (int)len ? 0 : -ENOSPC;
	}
	return snprintf(buf, len, "%" PRId64, value) < (int)len ? 0 : -ENOSPC;
}
