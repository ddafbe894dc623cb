// SPDX-License-Identifier: MIT
/*
 * sie-user: a perf-const compiled into a running, unmodified process, through the user-space SIE
 * engine (runtime/sie, the xsie-user tool next to xrtd). The target is "<pid>:<plan>", the plan
 * being written by `xtune sie plan` (one perf-const) or `xtune sie attach` (every perf-const it
 * attaches); a plan with several perf-consts names the knob's one as "<pid>:<plan>#<CONST>".
 * Registration copies the plan (what is checked is what is armed), refuses a process whose
 * executable is not on the allow-list (--allow sie-user:GLOB) and reads the values the analysis
 * holds for: `check` refuses any other before the journal, so it never reaches the process.
 *
 * The knobs of one plan and process share one engine, a ptrace tracer (a process has one). The
 * first write starts `xsie-user run`, which arms every span of the plan in one stop (build id and
 * live bytes checked) and stays attached; every value is then sent to it over a socket and
 * reported applied only once the engine wrote it at a moment when no thread was inside the
 * perf-const's spans (a pass never mixes two values), or refused with its reason (no quiescence in
 * time). A perf-const read once per pass needs no such moment (its change is one atomic store of
 * the word its trampoline loads once): the engine hands over its value page once armed and xrtd
 * stores that word itself, so such a change wakes no other process. If xrtd dies, the engine sees
 * the socket close and disarms: the process runs its original code again; if the engine died too,
 * the next xrtd disarms what it left before it registers the knob again (sie_leftover.c). Restoring
 * the last knob of a plan that holds a changed value disarms: the text is byte-exact again.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sie.h"
#include "backend.h"
#include "sie_leftover.h"

#define ENGINE_REPLY_MS 30000
#define VALUE_PAGE	4096

/* One `xsie-user run` per process and plan, shared by the knobs of the plan's perf-consts. */
struct sie_engine {
	pid_t pid;
	char plan[PATH_MAX];  /* the plan as given */
	char own[PATH_MAX];   /* our copy, which the engine arms */
	char state[PATH_MAX]; /* the engine's state while armed */
	struct sie_const consts[SIE_MAX_CONSTS];
	int nconsts;
	struct sie_user *users[SIE_MAX_CONSTS]; /* the knobs on it, by const */
	bool once[SIE_MAX_CONSTS];		/* read once per pass (sie_single_read) */
	int64_t *values;			/* the engine's value page, shared once armed */
	int page_fd;				/* its memfd, from "values" until mapped */
	pid_t engine;				/* `xsie-user run` while armed, else 0 */
	int sock;				/* its control stream */
	char rbuf[XRTD_ERR_LEN];		/* what it sent past the last line read */
	size_t rlen;
	struct sie_engine *next;
};

struct sie_user {
	struct sie_engine *e;
	int cidx; /* the knob's perf-const in e->consts */
	int64_t value;
};

static struct sie_engine *engines;

/*
 * One reply line from the engine into `line`; -1 on end of stream or timeout. Read in blocks, not
 * byte by byte: each change waits for this reply, and a poll and a read per byte cost tens of
 * microseconds per answer. A line longer than the buffer is cut there.
 */
static int engine_line(struct sie_engine *e, char *line, size_t len)
{
	char *nl;
	size_t n;

	while (!(nl = memchr(e->rbuf, '\n', e->rlen)) && e->rlen < sizeof(e->rbuf)) {
		struct pollfd pfd = {.fd = e->sock, .events = POLLIN};
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = {.iov_base = e->rbuf + e->rlen,
				    .iov_len = sizeof(e->rbuf) - e->rlen};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = u.buf,
				   .msg_controllen = sizeof(u.buf)};
		struct cmsghdr *c;
		ssize_t got;

		if (poll(&pfd, 1, ENGINE_REPLY_MS) <= 0)
			return -1;
		got = recvmsg(e->sock, &m, MSG_CMSG_CLOEXEC);
		if (got <= 0)
			return -1;
		/* A descriptor comes only with "values" (the value page); a second is not kept. */
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				int got_fd;

				memcpy(&got_fd, CMSG_DATA(c), sizeof(got_fd));
				if (e->page_fd < 0)
					e->page_fd = got_fd;
				else
					close(got_fd);
			}
		e->rlen += (size_t)got;
	}
	n = nl ? (size_t)(nl - e->rbuf) : e->rlen;
	snprintf(line, len, "%.*s", (int)n, e->rbuf);
	n = nl ? n + 1 : n;
	memmove(e->rbuf, e->rbuf + n, e->rlen - n);
	e->rlen -= n;
	return 0;
}

/* Close the control stream (the engine disarms if it has not yet) and reap it. */
static int engine_stop(struct sie_engine *e, char *last, size_t len)
{
	int st = 0;

	shutdown(e->sock, SHUT_WR);
	last[0] = 0;
	while (!engine_line(e, last, len) && strncmp(last, "err ", 4))
		;
	if (e->values)
		munmap(e->values, VALUE_PAGE);
	e->values = NULL;
	close(e->sock);
	waitpid(e->engine, &st, 0);
	e->engine = 0;
	e->sock = -1;
	for (int i = 0; i < e->nconsts; i++)
		if (e->users[i])
			e->users[i]->value = e->consts[i].original;
	unlink(e->state);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void share_values(struct sie_engine *e);

/* Start `xsie-user run` on the target; it answers "armed" or "err REASON". */
static int engine_start(struct sie_engine *e, char err[XRTD_ERR_LEN])
{
	char exe[PATH_MAX], pid[16], line[XRTD_ERR_LEN];
	int sv[2];

	if (sie_user_tool(exe, err))
		return -1;
	snprintf(pid, sizeof(pid), "%d", e->pid);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return xrtd_errf(err, errno, "sie-user: socketpair: %s", strerror(errno));
	e->engine = fork();
	if (e->engine == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid(); /* outlives a signal to xrtd's group: it must disarm after xrtd */
		dup2(sv[1], 0);
		dup2(sv[1], 1);
		execv(exe, (char *[]){exe, "run", "--pid", pid, "--plan", e->own, "--state",
				      e->state, "--share-values", NULL});
		_exit(127);
	}
	close(sv[1]);
	e->sock = sv[0];
	e->rlen = 0;
	if (e->engine < 0) {
		close(e->sock);
		e->engine = 0;
		return xrtd_errf(err, errno, "sie-user: cannot run %s", exe);
	}
	if (engine_line(e, line, sizeof(line)) || strncmp(line, "armed ", 6)) {
		char last[XRTD_ERR_LEN];

		engine_stop(e, last, sizeof(last));
		return xrtd_errf(err, EIO, "sie-user: %s",
				 !strncmp(line, "err ", 4) ? line + 4 : "xsie-user run failed");
	}
	share_values(e);
	return 0;
}

/*
 * After "armed", the engine's "values" line with its value page (or "values none: WHY"). Without
 * the page every change goes through the engine, as it always may.
 */
static void share_values(struct sie_engine *e)
{
	char line[XRTD_ERR_LEN];
	void *page = MAP_FAILED;

	if (!engine_line(e, line, sizeof(line)) && !strcmp(line, "values") && e->page_fd >= 0)
		page = mmap(NULL, VALUE_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, e->page_fd, 0);
	else
		fprintf(stderr,
			"xrtd: sie-user pid %d: no shared value page (%s): every change goes "
			"through the engine\n",
			e->pid, line);
	if (e->page_fd >= 0)
		close(e->page_fd);
	e->page_fd = -1;
	e->values = page == MAP_FAILED ? NULL : page;
}

/*
 * A perf-const read once per pass, changed with one atomic store of its word (the engine's own
 * `set` does the same, runtime/sie/transition.c). Only while the engine is there and has nothing to
 * say: a closed or talking control stream (the target exited, the engine died) takes the engine
 * path, which reports it.
 */
static bool store_value(struct sie_engine *e, int cidx, int64_t value)
{
	struct pollfd pfd = {.fd = e->sock, .events = POLLIN};

	if (!e->values || !e->once[cidx] || poll(&pfd, 1, 0) != 0)
		return false;
	__atomic_store_n(&e->values[cidx], value, __ATOMIC_RELEASE);
	return true;
}

/* "set NAME VALUE" to the running engine; its refusal is the error. */
static int engine_set(struct sie_engine *e, int cidx, int64_t value, char err[XRTD_ERR_LEN])
{
	char line[XRTD_ERR_LEN];

	dprintf(e->sock, "set %s %lld\n", e->consts[cidx].name, (long long)value);
	if (engine_line(e, line, sizeof(line)))
		return xrtd_errf(err, EIO, "sie-user: the engine for pid %d stopped answering",
				 e->pid);
	if (strncmp(line, "ok ", 3))
		return xrtd_errf(err, EINVAL, "sie-user: %s",
				 !strncmp(line, "err ", 4) ? line + 4 : line);
	return 0;
}

static int sie_user_read(struct xrtd_knob *k, int64_t *value, char err[XRTD_ERR_LEN])
{
	struct sie_user *s = k->priv;

	(void)err;
	*value = s->value;
	return 0;
}

static int sie_user_check(const struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	const struct sie_user *s = k->priv;
	char why[SIE_ERR_LEN];

	if (!sie_value_check(&s->e->consts[s->cidx], value, why))
		return 0;
	return xrtd_errf(err, ERANGE, "knob %s: %s", k->name, why);
}

static int sie_user_write(struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	struct sie_user *s = k->priv;
	char why[XRTD_ERR_LEN], last[XRTD_ERR_LEN];
	bool armed_now = false;
	int ret;

	if (!s->e->engine) {
		if (value == s->e->consts[s->cidx].original)
			return 0; /* the process runs its original code: nothing to arm */
		ret = engine_start(s->e, err);
		if (ret)
			return ret;
		armed_now = true;
	}
	if (store_value(s->e, s->cidx, value)) {
		s->value = value;
		return 0;
	}
	ret = engine_set(s->e, s->cidx, value, err);
	if (!ret) {
		s->value = value;
		return 0;
	}
	/* A first value refused once armed (a thread entered a span meanwhile): disarm again, so a
	 * refused change leaves the process on its original code, as an undo to the original would
	 * not. */
	if (armed_now) {
		snprintf(why, sizeof(why), "%s", err);
		if (engine_stop(s->e, last, sizeof(last)) &&
		    !(kill(s->e->pid, 0) && errno == ESRCH))
			return xrtd_errf(err, EIO, "%s; disarming again failed too: %s", why,
					 !strncmp(last, "err ", 4) ? last + 4
								   : "xsie-user run failed");
	}
	return ret;
}

/* The original back; the last changed perf-const of the plan disarms instead. */
static int sie_user_restore(struct xrtd_knob *k, int64_t original, char err[XRTD_ERR_LEN])
{
	struct sie_user *s = k->priv;
	struct sie_engine *e = s->e;
	char last[XRTD_ERR_LEN];

	if (!e->engine)
		return 0;
	for (int i = 0; i < e->nconsts; i++)
		if (i != s->cidx && e->users[i] && e->users[i]->value != e->consts[i].original)
			return sie_user_write(k, original, err);
	if (engine_stop(e, last, sizeof(last)) && !(kill(e->pid, 0) && errno == ESRCH))
		return xrtd_errf(err, EIO, "sie-user: disarm: %s",
				 !strncmp(last, "err ", 4) ? last + 4 : "xsie-user run failed");
	return 0;
}

static void engine_free(struct sie_engine *e)
{
	struct sie_engine **p = &engines;

	while (*p != e)
		p = &(*p)->next;
	*p = e->next;
	unlink(e->own);
	free(e);
}

static void sie_user_release(struct xrtd_knob *k)
{
	struct sie_user *s = k->priv;
	char last[XRTD_ERR_LEN];
	struct sie_engine *e;
	int users = 0;

	if (!s)
		return;
	e = s->e;
	e->users[s->cidx] = NULL;
	for (int i = 0; i < e->nconsts; i++)
		users += e->users[i] != NULL;
	if (!users) {
		if (e->engine)
			engine_stop(e, last, sizeof(last));
		engine_free(e);
	}
	free(s);
	k->priv = NULL;
}

/* Copy the plan into xrtd's state dir: later edits of the file cannot change what was checked. */
static int copy_plan(struct sie_engine *e, char err[XRTD_ERR_LEN])
{
	char buf[8192];
	FILE *in = fopen(e->plan, "r"), *out;
	size_t n;
	int fd;

	if (!in)
		return xrtd_errf(err, errno, "sie-user plan %s: %s", e->plan, strerror(errno));
	/* A new file of our own: a link or another's file planted at its name is refused. */
	unlink(e->own);
	fd = open(e->own, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	out = fd < 0 ? NULL : fdopen(fd, "w");
	if (!out) {
		if (fd >= 0)
			close(fd);
		fclose(in);
		return xrtd_errf(err, errno, "sie-user %s: %s", e->own, strerror(errno));
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, n, out);
	fclose(in);
	if (fclose(out))
		return xrtd_errf(err, EIO, "sie-user %s: %s", e->own, strerror(errno));
	return 0;
}

/* The engine of this process and plan: the running one, or a new one from a checked copy. */
static int engine_for(pid_t pid, const char *plan, struct sie_engine **out, char err[XRTD_ERR_LEN])
{
	char dir[PATH_MAX - 64], why[SIE_ERR_LEN];
	static int serial;
	struct sie_plan *p;
	struct sie_engine *e;
	int ret = 0;

	for (e = engines; e; e = e->next)
		if (e->pid == pid && !strcmp(e->plan, plan)) {
			*out = e;
			return 0;
		}
	if (snprintf(dir, sizeof(dir), "%s/sie-user", backend_state_dir()) >= (int)sizeof(dir))
		return xrtd_errf(err, ENAMETOOLONG, "sie-user: state directory name too long");
	mkdir(dir, 0700);
	/* No engine of ours on it: one of a previous xrtd may have left it armed. */
	for (e = engines; e && e->pid != pid; e = e->next)
		;
	if (!e && (ret = sie_leftover_disarm(pid, dir, err)))
		return ret;
	e = calloc(1, sizeof(*e));
	p = malloc(sizeof(*p));
	if (!e || !p) {
		free(e);
		free(p);
		return xrtd_errf(err, ENOMEM, "sie-user: out of memory");
	}
	e->pid = pid;
	e->sock = -1;
	e->page_fd = -1;
	snprintf(e->plan, sizeof(e->plan), "%s", plan);
	snprintf(e->own, sizeof(e->own), "%s/%d.%d.plan", dir, pid, ++serial);
	snprintf(e->state, sizeof(e->state), "%s/%d.%d.state", dir, pid, serial);
	ret = copy_plan(e, err);
	if (!ret && sie_plan_read(e->own, p, why))
		ret = xrtd_errf(err, EINVAL, "sie-user plan %s%s", plan,
				why + strlen("plan ") + strlen(e->own));
	if (!ret) {
		memcpy(e->consts, p->consts, sizeof(e->consts));
		e->nconsts = p->nconsts;
		for (int i = 0; i < p->nconsts; i++)
			e->once[i] = sie_single_read(p, &p->consts[i]);
		e->next = engines;
		engines = e;
		*out = e;
	} else {
		unlink(e->own);
		free(e);
	}
	free(p);
	return ret;
}

/* Only processes whose executable is on the allow-list (--allow sie-user:GLOB). */
static int allowed(pid_t pid, const char *target, char err[XRTD_ERR_LEN])
{
	char link[32], exe[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n < 0)
		return xrtd_errf(err, errno == ENOENT ? ESRCH : errno, "sie-user target '%s': %s",
				 target, errno == ENOENT ? "no such process" : strerror(errno));
	exe[n] = 0;
	if (!xrtd_allowed("sie-user", exe))
		return xrtd_errf(err, EPERM,
				 "sie-user target '%s': %s is not on xrtd's allow-list (--allow "
				 "sie-user:GLOB)",
				 target, exe);
	return 0;
}

static int sie_user_validate(struct xrtd_knob *k, char err[XRTD_ERR_LEN])
{
	char plan[PATH_MAX], *end, *hash;
	const char *cname = NULL;
	struct sie_engine *e = NULL;
	struct sie_user *s;
	pid_t pid;
	int cidx = -1, ret;

	if (k->netns[0])
		return xrtd_errf(err, EINVAL, "knob %s: netns applies to sysctl knobs only",
				 k->name);
	pid = (pid_t)strtol(k->target, &end, 10);
	if (pid <= 0 || *end != ':' || !end[1] || strlen(end + 1) >= sizeof(plan))
		return xrtd_errf(err, EINVAL,
				 "sie-user target '%s': expected <pid>:<plan file>[#<perf-const>]",
				 k->target);
	strcpy(plan, end + 1);
	hash = strrchr(plan, '#');
	if (hash) {
		*hash = 0;
		cname = hash + 1;
	}
	ret = allowed(pid, k->target, err);
	if (!ret)
		ret = engine_for(pid, plan, &e, err);
	if (ret)
		return ret;
	for (int i = 0; i < e->nconsts; i++)
		if (cname ? !strcmp(e->consts[i].name, cname) : e->nconsts == 1)
			cidx = i;
	if (cidx >= 0 && e->users[cidx])
		ret = xrtd_errf(err, EEXIST, "sie-user target '%s': %s is already a knob",
				k->target, e->consts[cidx].name);
	else if (cidx < 0 && cname)
		ret = xrtd_errf(err, ENOENT, "sie-user target '%s': the plan has no perf-const %s",
				k->target, cname);
	else if (cidx < 0)
		ret = xrtd_errf(err, EINVAL,
				"sie-user target '%s': the plan holds %d perf-consts: name one "
				"(<pid>:<plan>#<perf-const>)",
				k->target, e->nconsts);
	if (ret) {
		for (int i = 0; i < e->nconsts; i++)
			if (e->users[i])
				return ret;
		engine_free(e);
		return ret;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return xrtd_errf(err, ENOMEM, "sie-user: out of memory");
	s->e = e;
	s->cidx = cidx;
	s->value = e->consts[cidx].original;
	e->users[cidx] = s;
	k->priv = s;
	return 0;
}

static const struct xrtd_backend backend_sie_user = {
	.name = "sie-user",
	.id = XT_BACKEND_SIE_USER,
	.validate = sie_user_validate,
	.check = sie_user_check,
	.read = sie_user_read,
	.write = sie_user_write,
	.restore = sie_user_restore,
	.release = sie_user_release,
};
XRTD_BACKEND(backend_sie_user);
