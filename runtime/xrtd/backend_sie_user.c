// SPDX-License-Identifier: MIT
/*
 * sie-user: a perf-const compiled into a running, unmodified process, through the user-space SIE
 * engine (runtime/sie, the xsie-user tool next to xrtd). The target is "<pid>:<plan>", the plan
 * being written by `xtune sie plan --scope SCOPE.json --const NAME -o PLAN`. The first write arms
 * the spans in the process (live bytes checked, trampolines reading this knob's slot of xrtd's
 * table, no thread inside a safe span); from then on a value is one store into `applied`, read by
 * the trampolines at their next hit. Restore disarms: the text is byte-exact again.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xrtd.h"

struct sie_user {
	pid_t pid;
	char plan[PATH_MAX];  /* the plan as given */
	char own[PATH_MAX];   /* our copy: this knob's slot and xrtd's table */
	char state[PATH_MAX]; /* the engine's state while armed */
	int64_t original;
	int64_t value;
	bool armed;
};

/* Run xsie-user ARGS...; its error line becomes `err`. */
static int run_engine(char *args[], char err[XRTD_ERR_LEN])
{
	char exe[PATH_MAX], msg[XRTD_ERR_LEN] = "";
	int pipefd[2], st;
	ssize_t n;
	pid_t child;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 16);
	if (n < 0)
		return xrtd_errf(err, errno, "sie-user: /proc/self/exe: %s", strerror(errno));
	exe[n] = 0;
	strcpy(strrchr(exe, '/') + 1, "xsie-user");
	args[0] = exe;
	if (pipe2(pipefd, O_CLOEXEC))
		return xrtd_errf(err, errno, "sie-user: pipe: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		dup2(pipefd[1], 2);
		dup2(open("/dev/null", O_WRONLY), 1);
		execv(exe, args);
		_exit(127);
	}
	close(pipefd[1]);
	n = read(pipefd[0], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = 0;
	msg[strcspn(msg, "\n")] = 0;
	close(pipefd[0]);
	if (child < 0 || waitpid(child, &st, 0) < 0)
		return xrtd_errf(err, errno, "sie-user: cannot run %s", exe);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return xrtd_errf(err, EIO, "sie-user: %s", msg[0] ? msg : "xsie-user failed");
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
			fprintf(out, "knobs /dev/shm/%s %lx\n", xrtd.opt.shm_name,
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
	*value = s->armed ? s->value : s->original;
	return 0;
}

static int sie_user_write(struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	struct sie_user *s = k->priv;
	char pid[16];
	int ret;

	if (!s->armed) {
		snprintf(pid, sizeof(pid), "%d", s->pid);
		ret = own_plan(k, s, err);
		if (!ret)
			ret = run_engine((char *[]){NULL, "arm", "--pid", pid, "--plan", s->own,
						    "--state", s->state, NULL},
					 err);
		if (ret)
			return ret;
		s->armed = true;
	}
	/* Takes effect when xrtd publishes `applied`, which the trampolines read. */
	s->value = value;
	return 0;
}

static int sie_user_restore(struct xrtd_knob *k, int64_t original, char err[XRTD_ERR_LEN])
{
	struct sie_user *s = k->priv;
	int ret;

	(void)original;
	if (!s->armed)
		return 0;
	if (kill(s->pid, 0) && errno == ESRCH) {
		s->armed = false; /* the process is gone, and its text with it */
		return 0;
	}
	ret = run_engine((char *[]){NULL, "disarm", "--plan", s->own, "--state", s->state, NULL},
			 err);
	if (!ret) {
		s->armed = false;
		unlink(s->state);
		unlink(s->own);
	}
	return ret;
}

static void sie_user_release(struct xrtd_knob *k)
{
	free(k->priv);
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
	if (snprintf(dir, sizeof(dir), "%s/sie-user", xrtd.opt.state_dir) >= (int)sizeof(dir)) {
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
