// SPDX-License-Identifier: MIT
/*
 * sysfs: an attribute file under /sys, e.g. /sys/block/loop0/queue/scheduler. Files that list
 * choices with the selected one in brackets ("none [mq-deadline] kyber") are enum knobs; when
 * no enum values are registered, the file's own list is taken.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"

#define SYSFS_TEXT_LEN 1024

static int sysfs_read(struct xrtd_knob *k, int64_t *value, char err[XRTD_ERR_LEN])
{
	char text[SYSFS_TEXT_LEN];
	int ret = xrtd_read_file(k->target, text, sizeof(text), err);

	return ret ? ret : xrtd_knob_parse(k, text, value, err);
}

static int sysfs_write(struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	char text[64];

	if (xrtd_knob_format(k, value, text, sizeof(text)))
		return xrtd_errf(err, ERANGE, "knob %s: no text for value %lld", k->name,
				 (long long)value);
	return xrtd_write_file(k->target, text, err);
}

/* "none [mq-deadline] kyber" → enum values none, mq-deadline, kyber. */
static int take_enum(struct xrtd_knob *k, char *text, char err[XRTD_ERR_LEN])
{
	for (char *tok = strtok(text, " \t"); tok; tok = strtok(NULL, " \t")) {
		size_t len = strlen(tok);

		if (tok[0] == '[' && len > 2 && tok[len - 1] == ']') {
			tok[len - 1] = 0;
			tok++;
		}
		if (k->enum_count == XRTD_ENUM_MAX || strlen(tok) >= XRTD_ENUM_LEN)
			return xrtd_errf(err, E2BIG, "%s: too many or too long choices", k->target);
		strcpy(k->enum_values[k->enum_count++], tok);
	}
	k->type = XT_KNOB_ENUM;
	return 0;
}

static int sysfs_validate(struct xrtd_knob *k, char err[XRTD_ERR_LEN])
{
	char text[SYSFS_TEXT_LEN];
	int ret;

	if (k->netns[0])
		return xrtd_errf(err, EINVAL, "knob %s: netns applies to sysctl knobs only",
				 k->name);
	if (strncmp(k->target, "/sys/", 5) || strstr(k->target, "/../") ||
	    strstr(k->target, "/./") || strstr(k->target, "//"))
		return xrtd_errf(err, EINVAL,
				 "sysfs target '%s': must be a normalized path under "
				 "/sys/",
				 k->target);
	if (!xrtd_allowed("sysfs", k->target))
		return xrtd_errf(err, EPERM,
				 "sysfs %s is not on xrtd's allow-list (--allow "
				 "sysfs:GLOB)",
				 k->target);
	if (access(k->target, R_OK | W_OK))
		return xrtd_errf(err, errno, "sysfs %s: %s", k->target, strerror(errno));
	ret = xrtd_read_file(k->target, text, sizeof(text), err);
	if (ret)
		return ret;
	if (strchr(text, '[') && k->type == XT_KNOB_INT)
		return take_enum(k, text, err);
	return 0;
}

static const struct xrtd_backend backend_sysfs = {
	.name = "sysfs",
	.id = XT_BACKEND_SYSFS,
	.validate = sysfs_validate,
	.read = sysfs_read,
	.write = sysfs_write,
	.coupled = true,
};
XRTD_BACKEND(backend_sysfs);
