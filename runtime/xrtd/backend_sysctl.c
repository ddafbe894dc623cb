// SPDX-License-Identifier: MIT
/*
 * sysctl: a /proc/sys key ("net.core.somaxconn"), or one field of a multi-value key
 * ("net.ipv4.tcp_rmem[1]"), optionally inside the network namespace at k->netns.
 * /proc/sys/net resolves against the calling thread's namespace, so reads and writes setns()
 * into the knob's namespace and back (the apply lock keeps this to one thread at a time).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backend.h"

#define SYSCTL_FIELDS_MAX 16
#define SYSCTL_TEXT_LEN	  1024

struct sysctl_knob {
	char path[PATH_MAX];
	int field; /* -1: the whole value */
	int nsfd;  /* -1: xrtd's own namespace */
};

static int host_netns = -1;

static int enter_netns(const struct sysctl_knob *s, const struct xrtd_knob *k,
		       char err[XRTD_ERR_LEN])
{
	if (s->nsfd < 0)
		return 0;
	if (host_netns < 0)
		host_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (host_netns < 0)
		return xrtd_errf(err, errno, "/proc/self/ns/net: %s", strerror(errno));
	if (setns(s->nsfd, CLONE_NEWNET))
		return xrtd_errf(err, errno, "knob %s: setns %s: %s", k->name, k->netns,
				 strerror(errno));
	return 0;
}

static void leave_netns(const struct sysctl_knob *s)
{
	if (s->nsfd >= 0 && setns(host_netns, CLONE_NEWNET))
		abort(); /* never keep running in the wrong namespace */
}

static int read_text(struct xrtd_knob *k, char *buf, char err[XRTD_ERR_LEN])
{
	struct sysctl_knob *s = k->priv;
	int ret = enter_netns(s, k, err);

	if (ret)
		return ret;
	ret = xrtd_read_file(s->path, buf, SYSCTL_TEXT_LEN, err);
	leave_netns(s);
	return ret;
}

/* Split "4096\t131072\t6291456" in place; returns the number of fields. */
static int split_fields(char *text, char *fields[SYSCTL_FIELDS_MAX])
{
	int n = 0;

	for (char *tok = strtok(text, " \t"); tok && n < SYSCTL_FIELDS_MAX;
	     tok = strtok(NULL, " \t"))
		fields[n++] = tok;
	return n;
}

static int sysctl_read(struct xrtd_knob *k, int64_t *value, char err[XRTD_ERR_LEN])
{
	struct sysctl_knob *s = k->priv;
	char text[SYSCTL_TEXT_LEN], *fields[SYSCTL_FIELDS_MAX];
	int ret = read_text(k, text, err), n;

	if (ret)
		return ret;
	if (s->field < 0)
		return xrtd_knob_parse(k, text, value, err);
	n = split_fields(text, fields);
	if (s->field >= n)
		return xrtd_errf(err, EINVAL, "%s: has %d fields, no field %d", k->target, n,
				 s->field);
	return xrtd_knob_parse(k, fields[s->field], value, err);
}

static int sysctl_write(struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	struct sysctl_knob *s = k->priv;
	char text[SYSCTL_TEXT_LEN], out[SYSCTL_TEXT_LEN], one[64], *fields[SYSCTL_FIELDS_MAX];
	size_t len = 0;
	int ret, n;

	if (xrtd_knob_format(k, value, one, sizeof(one)))
		return xrtd_errf(err, ERANGE, "knob %s: no text for value %lld", k->name,
				 (long long)value);
	if (s->field < 0) {
		snprintf(out, sizeof(out), "%s", one);
	} else {
		ret = read_text(k, text, err);
		if (ret)
			return ret;
		n = split_fields(text, fields);
		if (s->field >= n)
			return xrtd_errf(err, EINVAL, "%s: has %d fields, no field %d", k->target,
					 n, s->field);
		fields[s->field] = one;
		out[0] = 0;
		for (int i = 0; i < n; i++)
			len += snprintf(out + len, sizeof(out) - len, "%s%s", i ? "\t" : "",
					fields[i]);
	}
	ret = enter_netns(s, k, err);
	if (ret)
		return ret;
	ret = xrtd_write_file(s->path, out, err);
	leave_netns(s);
	return ret;
}

static int parse_target(struct xrtd_knob *k, struct sysctl_knob *s, char key[XT_KNOB_TARGET_LEN],
			char err[XRTD_ERR_LEN])
{
	char *open, *end;
	size_t len;

	snprintf(key, XT_KNOB_TARGET_LEN, "%s", k->target);
	s->field = -1;
	open = strchr(key, '[');
	if (open) {
		long f = strtol(open + 1, &end, 10);

		if (end == open + 1 || strcmp(end, "]") || f < 0 || f >= SYSCTL_FIELDS_MAX)
			return xrtd_errf(err, EINVAL, "sysctl target '%s': field must be [0..%d]",
					 k->target, SYSCTL_FIELDS_MAX - 1);
		s->field = f;
		*open = 0;
	}
	len = strlen(key);
	if (!len || key[0] == '.' || key[len - 1] == '.' || strstr(key, "..") ||
	    strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != len)
		return xrtd_errf(err, EINVAL,
				 "sysctl target '%s': not a sysctl key like "
				 "net.core.somaxconn",
				 k->target);
	if (!xrtd_allowed("sysctl", key))
		return xrtd_errf(err, EPERM,
				 "sysctl %s is not on xrtd's allow-list (--allow "
				 "sysctl:GLOB)",
				 key);
	snprintf(s->path, sizeof(s->path), "/proc/sys/%s", key);
	for (char *p = s->path + strlen("/proc/sys/"); *p; p++)
		if (*p == '.')
			*p = '/';
	return 0;
}

static int sysctl_validate(struct xrtd_knob *k, char err[XRTD_ERR_LEN])
{
	char key[XT_KNOB_TARGET_LEN];
	struct sysctl_knob *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return xrtd_errf(err, ENOMEM, "out of memory");
	s->nsfd = -1;
	k->priv = s;
	ret = parse_target(k, s, key, err);
	if (ret)
		return ret;
	if (k->netns[0]) {
		s->nsfd = open(k->netns, O_RDONLY | O_CLOEXEC);
		if (s->nsfd < 0)
			return xrtd_errf(err, errno, "knob %s: netns %s: %s", k->name, k->netns,
					 strerror(errno));
		if (ioctl(s->nsfd, NS_GET_NSTYPE) != CLONE_NEWNET)
			return xrtd_errf(err, EINVAL, "knob %s: %s is not a network namespace",
					 k->name, k->netns);
	}
	ret = enter_netns(s, k, err);
	if (ret)
		return ret;
	if (access(s->path, R_OK | W_OK))
		ret = xrtd_errf(err, errno, "sysctl %s: %s%s%s", key, strerror(errno),
				k->netns[0] ? " in netns " : "", k->netns);
	leave_netns(s);
	return ret;
}

static void sysctl_release(struct xrtd_knob *k)
{
	struct sysctl_knob *s = k->priv;

	if (s && s->nsfd >= 0)
		close(s->nsfd);
	free(s);
	k->priv = NULL;
}

static const struct xrtd_backend backend_sysctl = {
	.name = "sysctl",
	.id = XT_BACKEND_SYSCTL,
	.validate = sysctl_validate,
	.read = sysctl_read,
	.write = sysctl_write,
	.coupled = true,
	.release = sysctl_release,
};
XRTD_BACKEND(backend_sysctl);
