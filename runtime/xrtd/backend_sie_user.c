// SPDX-License-Identifier: MIT
/*
 * sie-user: a perf-const compiled into a running, unmodified process, through the user-space SIE
 * engine (runtime/sie, the xsie-user tool next to xrtd). The target is "<pid>:<plan>", the plan
 * being written by `xtune sie plan --scope SCOPE.json --const NAME -o PLAN`. The first write starts
 * `xsie-user run`, which arms the spans (build id and live bytes checked) and stays attached; every
 * value is then sent to it over a socket and reported applied only once the engine wrote it at a
 * moment when no thread was inside the perf-const's spans (a pass never mixes two values), or
 * refused with its reason (outside the plan's range or constraints, no quiescence in time). If xrtd
 * dies, the engine sees the socket close and disarms: the process runs its original code again.
 * Restore disarms: the text is byte-exact again.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"

#define ENGINE_REPLY_MS 30000

struct sie_user {
	pid_t pid;
	char plan[PATH_MAX];		 /* the plan as given */
	char own[PATH_MAX];		 /* our copy: this knob's slot and xrtd's table */
	char state[PATH_MAX];		 /* the engine's state while armed */
	char name[XT_KNOB_NAME_LEN + 1]; /* the perf-const */
	int64_t original;
	int64_t value;
	pid_t engine; /* `xsie-user run` while armed, else 0 */
	int sock;     /* its control stream */
};

/* One reply line from the engine into `line`; -1 on end of stream or timeout. */
static int engine_line(struct sie_user *s, char *line, size_t len)
{
	size_t n = 0;

	while (n < len - 1) {
		struct pollfd pfd = {.fd = s->sock, .events = POLLIN};

		if (poll(&pfd, 1, ENGINE_REPLY_MS) <= 0 || read(s->sock, line + n, 1) != 1)
			return -1;
		if (line[n] == '\n')
			break;
		n++;
	}
	line[n] = 0;
	return 0;
}

/* Close the control stream (the engine disarms if it has not yet) and reap it. */
static int engine_stop(struct sie_user *s, char *last, size_t len)
{
	int st = 0;

	shutdown(s->sock, SHUT_WR);
	last[0] = 0;
	while (!engine_line(s, last, len) && strncmp(last, "err ", 4))
		;
	close(s->sock);
	waitpid(s->engine, &st, 0);
	s->engine = 0;
	s->sock = -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Start `xsie-user run` on the target; it answers "armed" or "err REASON". */
static int engine_start(struct sie_user *s, char err[XRTD_ERR_LEN])
{
	char exe[PATH_MAX], pid[16], line[XRTD_ERR_LEN];
	int sv[2];
	ssize_t n;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 16);
	if (n < 0)
		return xrtd_errf(err, errno, "sie-user: /proc/self/exe: %s", strerror(errno));
	exe[n] = 0;
	strcpy(strrchr(exe, '/') + 1, "xsie-user");
	snprintf(pid, sizeof(pid), "%d", s->pid);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return xrtd_errf(err, errno, "sie-user: socketpair: %s", strerror(errno));
	s->engine = fork();
	if (s->engine == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid(); /* outlives a signal to xrtd's group: it must disarm after xrtd */
		dup2(sv[1], 0);
		dup2(sv[1], 1);
		execv(exe, (char *[]){exe, "run", "--pid", pid, "--plan", s->own, "--state",
				      s->state, NULL});
		_exit(127);
	}
	close(sv[1]);
	s->sock = sv[0];
	if (s->engine < 0) {
		close(s->sock);
		s->engine = 0;
		return xrtd_errf(err, errno, "sie-user: cannot run %s", exe);
	}
	if (engine_line(s, line, sizeof(line)) || strncmp(line, "armed ", 6)) {
		char last[XRTD_ERR_LEN];

		engine_stop(s, last, sizeof(last));
		return xrtd_errf(err, EIO, "sie-user: %s",
				 !strncmp(line, "err ", 4) ? line + 4 : "xsie-user run failed");
	}
	return 0;
}

/* Copy the plan with every span pointed at this knob's slot of xrtd's table. */
static int own_plan(struct xrtd_knob *k, struct sie_user *s, char err[XRTD_ERR_LEN])
{
	char line[8192], name[XT_KNOB_NAME_LEN + 1];
	FILE *in = fopen(s->plan, "r"), *out;
	int spans = 0;

	if (!in)
		return xrtd_errf(err, errno, "sie-user plan %s: %s", s->plan, strerror(errno));
	out = fopen(s->own, "w");
	if (!out) {
		fclose(in);
		return xrtd_errf(err, errno, "sie-user %s: %s", s->own, strerror(errno));
	}
	while (fgets(line, sizeof(line), in)) {
		char *rest;

		if (!strncmp(line, "knobs ", 6)) {
			fprintf(out, "knobs /dev/shm/%s %lx\n", table_name(),
				(unsigned long)XT_KNOB_TABLE_SIZE);
		} else if (!strncmp(line, "span ", 5) && sscanf(line, "span %64s", name) == 1 &&
			   (rest = strchr(line + 5 + strlen(name) + 1, ' '))) {
			fprintf(out, "span %s %d%s", name, k->slot, rest);
			spans++;
		} else {
			fputs(line, out);
		}
	}
	fclose(in);
	if (fclose(out) || !spans)
		return xrtd_errf(err, EINVAL, "sie-user plan %s: no spans", s->plan);
	return 0;
}

static int sie_user_read(struct xrtd_knob *k, int64_t *value, char err[XRTD_ERR_LEN])
{
	struct sie_user *s = k->priv;

	(void)err;
	*value = s->engine ? s->value : s->original;
	return 0;
}

static int sie_user_write(struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	struct sie_user *s = k->priv;
	char line[XRTD_ERR_LEN];
	int ret;

	if (!s->engine) {
		ret = own_plan(k, s, err);
		if (!ret)
			ret = engine_start(s, err);
		if (ret)
			return ret;
	}
	dprintf(s->sock, "set %s %lld\n", s->name, (long long)value);
	if (engine_line(s, line, sizeof(line)))
		return xrtd_errf(err, EIO, "sie-user: the engine for pid %d stopped answering",
				 s->pid);
	if (strncmp(line, "ok ", 3))
		return xrtd_errf(err, EINVAL, "sie-user: %s",
				 !strncmp(line, "err ", 4) ? line + 4 : line);
	s->value = value;
	return 0;
}

static int sie_user_restore(struct xrtd_knob *k, int64_t original, char err[XRTD_ERR_LEN])
{
	struct sie_user *s = k->priv;
	char last[XRTD_ERR_LEN];

	(void)original;
	if (!s->engine)
		return 0;
	if (engine_stop(s, last, sizeof(last)) && !(kill(s->pid, 0) && errno == ESRCH))
		return xrtd_errf(err, EIO, "sie-user: disarm: %s",
				 !strncmp(last, "err ", 4) ? last + 4 : "xsie-user run failed");
	unlink(s->state);
	unlink(s->own);
	return 0;
}

static void sie_user_release(struct xrtd_knob *k)
{
	struct sie_user *s = k->priv;
	char last[XRTD_ERR_LEN];

	if (s && s->engine)
		engine_stop(s, last, sizeof(last));
	free(s);
	k->priv = NULL;
}

static int sie_user_validate(struct xrtd_knob *k, char err[XRTD_ERR_LEN])
{
	char line[512], dir[PATH_MAX - 64], cname[XT_KNOB_NAME_LEN + 1];
	struct sie_user *s;
	long long original;
	int found = 0;
	char *end;
	FILE *f;

	if (k->netns[0])
		return xrtd_errf(err, EINVAL, "knob %s: netns applies to sysctl knobs only",
				 k->name);
	s = calloc(1, sizeof(*s));
	if (!s)
		return xrtd_errf(err, ENOMEM, "sie-user: out of memory");
	s->pid = (pid_t)strtol(k->target, &end, 10);
	if (s->pid <= 0 || *end != ':' || strlen(end + 1) >= sizeof(s->plan)) {
		free(s);
		return xrtd_errf(err, EINVAL, "sie-user target '%s': expected <pid>:<plan file>",
				 k->target);
	}
	strcpy(s->plan, end + 1);
	if (kill(s->pid, 0) && errno == ESRCH) {
		free(s);
		return xrtd_errf(err, ESRCH, "sie-user target '%s': no such process", k->target);
	}
	f = fopen(s->plan, "r");
	if (!f) {
		free(s);
		return xrtd_errf(err, errno, "sie-user plan %s: %s", end + 1, strerror(errno));
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "const %64s %lld", cname, &original) == 2)
			found++;
	fclose(f);
	if (found != 1) {
		free(s);
		return xrtd_errf(err, EINVAL, "sie-user plan %s: must hold exactly one perf-const",
				 end + 1);
	}
	s->original = s->value = original;
	snprintf(s->name, sizeof(s->name), "%s", cname);
	if (snprintf(dir, sizeof(dir), "%s/sie-user", backend_state_dir()) >= (int)sizeof(dir)) {
		free(s);
		return xrtd_errf(err, ENAMETOOLONG, "sie-user: state directory name too long");
	}
	mkdir(dir, 0700);
	snprintf(s->own, sizeof(s->own), "%s/%d.%d.plan", dir, s->pid, k->slot);
	snprintf(s->state, sizeof(s->state), "%s/%d.%d.state", dir, s->pid, k->slot);
	k->priv = s;
	return 0;
}

static const struct xrtd_backend backend_sie_user = {
	.name = "sie-user",
	.id = XT_BACKEND_SIE_USER,
	.validate = sie_user_validate,
	.read = sie_user_read,
	.write = sie_user_write,
	.restore = sie_user_restore,
	.release = sie_user_release,
};
XRTD_BACKEND(backend_sie_user);
