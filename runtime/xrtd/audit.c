// SPDX-License-Identifier: MIT
/* The audit log: one line per change, what changed and why, for a person to read. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "registry.h"

static int audit_fd = -1;
static char path[PATH_MAX];

int audit_open(const char *state_dir, char err[XRTD_ERR_LEN])
{
	snprintf(path, sizeof(path), "%s/audit.log", state_dir);
	audit_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (audit_fd < 0)
		return xrtd_errf(err, errno, "%s: %s", path, strerror(errno));
	return 0;
}

const char *audit_path(void)
{
	return path;
}

static void value_text(const struct xrtd_knob *k, int64_t v, char *buf, size_t len)
{
	if (xrtd_knob_format(k, v, buf, len))
		snprintf(buf, len, "#%lld", (long long)v);
}

/* "<time> knob=<name> backend=<b> target=<t>[ netns=<n>] " */
static void line_start(struct jbuf *line, const struct xrtd_knob *k)
{
	char when[40];
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	jb_printf(line, "%s.%06ldZ knob=%s backend=%s target=%s%s%s ", when, ts.tv_nsec / 1000,
		  k->name, k->backend->name, k->target, k->netns[0] ? " netns=" : "", k->netns);
}

/* " reason=\"...\"\n", then the line goes out. */
static void line_end(struct jbuf *line, const char *reason)
{
	jb_printf(line, " reason=");
	jb_str(line, reason && *reason ? reason : "(none given)");
	jb_printf(line, "\n");
	if (audit_fd >= 0 && write(audit_fd, line->p, line->len) != (ssize_t)line->len)
		fprintf(stderr, "xrtd: audit write failed: %s\n", strerror(errno));
	jb_free(line);
}

void audit_change(const struct xrtd_knob *k, int64_t old, int64_t value, const char *outcome,
		  const char *reason, const char *via)
{
	struct jbuf line = {0};
	char a[64], b[64];

	value_text(k, old, a, sizeof(a));
	value_text(k, value, b, sizeof(b));
	line_start(&line, k);
	jb_printf(&line, "%s -> %s %s via=%s", a, b, outcome, via);
	line_end(&line, reason);
}

void audit_registration(const struct xrtd_knob *k, const char *outcome, const char *reason)
{
	struct jbuf line = {0};

	line_start(&line, k);
	jb_printf(&line, "%s via=restart", outcome);
	line_end(&line, reason);
}
