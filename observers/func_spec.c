// SPDX-License-Identifier: MIT
/* The func family's --func BINARY:FUNCTION[:argN[/32]=NAME]... (N = 0..4, /32 for an int). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "observer.h"

/* "argN=NAME" or "argN/32=NAME" into arg k of spec; 0 or -1 with the reason in err. */
static int parse_arg(const char *s, size_t len, struct xt_func_spec *spec, char *err, size_t n)
{
	int reg, used = 0, k = spec->nargs;
	const char *name;
	size_t i, name_len;

	if (k == XT_MAX_FUNC_ARGS)
		return snprintf(err, n, "at most %d arguments per function", XT_MAX_FUNC_ARGS), -1;
	if (sscanf(s, "arg%1d%n", &reg, &used) != 1 || reg < 0 || reg > 4)
		return snprintf(err, n, "'%.*s': the argument must be arg0..arg4", (int)len, s), -1;
	spec->args[k].bits32 = !strncmp(s + used, "/32", 3);
	used += spec->args[k].bits32 ? 3 : 0;
	if (s[used] != '=')
		return snprintf(err, n, "'%.*s' is not argN=NAME or argN/32=NAME", (int)len, s), -1;
	name = s + used + 1;
	name_len = len - used - 1;
	for (i = 0; i < name_len; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '_')
			break;
	if (!name_len || i < name_len || name_len >= sizeof(spec->args[k].name))
		return snprintf(err, n, "'%.*s': NAME must be 1..47 letters, digits or _", (int)len,
				s),
		       -1;
	for (i = 0; (int)i < k; i++)
		if (strlen(spec->args[i].name) == name_len &&
		    !strncmp(spec->args[i].name, name, name_len))
			return snprintf(err, n, "'%.*s': NAME given twice", (int)len, s), -1;
	spec->args[k].reg = reg;
	snprintf(spec->args[k].name, sizeof(spec->args[k].name), "%.*s", (int)name_len, name);
	spec->nargs++;
	return 0;
}

/* BINARY:FUNCTION[:argN[/32]=NAME]...: the argument gauges are the trailing "arg" parts. */
int xt_func_spec_parse(const char *arg, struct xt_func_spec *spec, char *err, size_t n)
{
	const char *end = arg + strlen(arg), *colon;
	const char *gauges[XT_MAX_FUNC_ARGS + 1];
	size_t gauge_len[XT_MAX_FUNC_ARGS + 1];
	int ngauges = 0, i;

	memset(spec, 0, sizeof(*spec));
	for (;;) {
		for (colon = end; colon > arg && colon[-1] != ':'; colon--)
			;
		if (colon == arg)
			return snprintf(err, n, "'%s' is not BINARY:FUNCTION", arg), -1;
		if (strncmp(colon, "arg", 3) || !memchr(colon, '=', end - colon))
			break;
		if (ngauges == XT_MAX_FUNC_ARGS)
			return snprintf(err, n, "at most %d arguments per function",
					XT_MAX_FUNC_ARGS),
			       -1;
		gauges[ngauges] = colon;
		gauge_len[ngauges++] = end - colon;
		end = colon - 1;
	}
	if (colon == end || colon - 1 == arg || (size_t)(end - colon) >= sizeof(spec->function))
		return snprintf(err, n, "'%s' is not BINARY:FUNCTION", arg), -1;
	snprintf(spec->function, sizeof(spec->function), "%.*s", (int)(end - colon), colon);
	snprintf(spec->binary, sizeof(spec->binary), "%.*s", (int)(colon - 1 - arg), arg);
	for (i = ngauges - 1; i >= 0; i--) /* in the order given */
		if (parse_arg(gauges[i], gauge_len[i], spec, err, n))
			return -1;
	return 0;
}
