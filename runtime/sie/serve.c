// SPDX-License-Identifier: MIT
/*
 * The int3 fallback. Where no 5-byte jump fits (a branch target inside it, a call right after
 * the constant, a jump table in the function), the span starts with an int3 instead. A process
 * cannot run past an int3 alone, so the engine stays attached as its tracer: every hit stops the
 * thread, the engine points it at the span's trampoline and lets it go. It costs two context
 * switches per hit (reported separately by the benchmark); everything else (trampolines, knob
 * slot, safe spans, byte-exact disarm) is the same as for jumps.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sie.h"
#include "target.h"

static struct thread *find(struct target *t, pid_t tid)
{
	for (int i = 0; i < t->nthreads; i++)
		if (t->threads[i].tid == tid)
			return &t->threads[i];
	return NULL;
}

/* Handle one ptrace event; a breakpoint hit is sent to its trampoline. Returns -1 when idle. */
static int serve_one(struct target *t, const struct sie_plan *p, int block)
{
	struct user_regs_struct r;
	struct thread *th;
	int st, sig = 0;
	pid_t tid = waitpid(-1, &st, __WALL | (block ? 0 : WNOHANG));

	if (tid <= 0)
		return -1;
	th = find(t, tid);
	if (!th) { /* a new thread or fork child, before its parent's event */
		if (WIFSTOPPED(st))
			target_unknown_stop(t, tid);
		return 0;
	}
	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		th->gone = 1;
		return 0;
	}
	if (st >> 16 && st >> 16 != PTRACE_EVENT_STOP) {
		int n = t->nthreads;

		target_event(t, tid, st); /* a new thread is left stopped: let it run */
		if (t->nthreads > n && !t->holding)
			ptrace(PTRACE_CONT, t->threads[n].tid, 0, 0);
	} else if (st >> 16 == 0 && WSTOPSIG(st) == SIGTRAP &&
		   !ptrace(PTRACE_GETREGS, tid, 0, &r)) {
		sig = SIGTRAP;
		for (int k = 0; k < p->nspans; k++) {
			const struct sie_span *sp = &p->spans[k];

			if (sp->patch != SIE_PATCH_INT3)
				continue;
			if (r.rip == sp->live + 1) {
				r.rip = sp->tramp_live;
				ptrace(PTRACE_SETREGS, tid, 0, &r);
				sig = 0;
				break;
			}
			/* A hit already stepped back while stopped: it runs the int3 again. */
			if (r.rip == sp->live) {
				sig = 0;
				break;
			}
		}
	} else if (st >> 16 == 0 && WSTOPSIG(st) != SIGSTOP) {
		sig = WSTOPSIG(st); /* the target's own signal: deliver it */
	}
	ptrace(PTRACE_CONT, tid, 0, sig);
	return 0;
}

static long elapsed_ns(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - since->tv_sec) * 1000000000l + (now.tv_nsec - since->tv_nsec);
}

/* Between attempts to quiesce: keep serving breakpoints for about a millisecond. */
static void serve_pause(struct target *t, const struct sie_plan *p)
{
	struct timespec a;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		if (serve_one(t, p, 0))
			nanosleep(&(struct timespec){0, 50000}, NULL);
	} while (elapsed_ns(&a) < 1000000);
}

/*
 * Serve the events pending now, for at most about a millisecond: threads that hit int3 spans
 * faster than the engine serves them would otherwise keep it from its control channel for good.
 * Returns 1 when events may be left.
 */
static int serve_pending(struct target *t, const struct sie_plan *p)
{
	struct timespec a;

	clock_gettime(CLOCK_MONOTONIC, &a);
	while (!serve_one(t, p, 0))
		if (elapsed_ns(&a) >= 1000000)
			return 1;
	return 0;
}

static int trap_pending(pid_t pid, pid_t tid)
{
	char path[64], line[128];
	unsigned long long mask = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigPnd: %llx", &mask) == 1)
			break;
	fclose(f);
	return !!(mask & (1ull << (SIGTRAP - 1)));
}

/*
 * A thread that ran into an int3 just as it was stopped still has the SIGTRAP queued; without a
 * tracer it would kill the process. Let each such thread take it now (the bytes are already
 * restored) and step it back onto the original instruction.
 */
static void drain_traps(struct target *t, const struct sie_plan *p)
{
	for (int i = 0; i < t->nthreads; i++) {
		struct thread *th = &t->threads[i];
		struct user_regs_struct r;
		int st;

		while (!th->gone && trap_pending(t->pid, th->tid)) {
			if (ptrace(PTRACE_CONT, th->tid, 0, 0) ||
			    target_wait(t, th->tid, &st) < 0 || !WIFSTOPPED(st)) {
				th->gone = 1;
				break;
			}
			if (ptrace(PTRACE_GETREGS, th->tid, 0, &r))
				continue;
			for (int k = 0; k < p->nspans; k++)
				if (p->spans[k].patch == SIE_PATCH_INT3 &&
				    r.rip == p->spans[k].live + 1) {
					r.rip = p->spans[k].live;
					ptrace(PTRACE_SETREGS, th->tid, 0, &r);
				}
		}
	}
}

/* Seize, arm and stay attached as the tracer (following clones). */
static int arm_attached(struct target *t, pid_t pid, struct sie_plan *p, const struct sie_opts *o,
			struct sie_state *s, char err[SIE_ERR_LEN])
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	/* Attached first: a main thread that has exited is refused with that reason. */
	if (target_attach(t, pid, 0, err))
		return -1;
	if (sie_find_bias(pid, p, &s->bias, err) || sie_arm_stopped(t, p, o, s, err)) {
		target_detach(t);
		return -1;
	}
	/* Fork children get the original bytes back and run free; exec ends the attachment. */
	t->plan = p;
	for (int i = 0; i < t->nthreads; i++)
		ptrace(PTRACE_SETOPTIONS, t->threads[i].tid, 0,
		       PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
			       PTRACE_O_TRACEEXEC);
	s->server = getpid();
	return 0;
}

/* Disarm: quiesce while still serving hits, restore the bytes, detach. */
static int disarm_attached(struct target *t, struct sie_plan *p, const struct sie_opts *o,
			   struct sie_state *s, char err[SIE_ERR_LEN])
{
	struct sie_opts so = *o;

	so.pause = serve_pause;
	so.timeout_ms = o->timeout_ms * 10;
	t->holding = 1;
	if (target_stop(t, 0, err) || sie_disarm_stopped(t, p, &so, s, err)) {
		target_detach(t);
		return -1;
	}
	drain_traps(t, p);
	target_detach(t);
	return 0;
}

/* The process exited or called exec: nothing of ours is left in it; let it go. */
static int ended(struct target *t, char err[SIE_ERR_LEN])
{
	if (!target_ended(t, err))
		return 0;
	target_detach(t);
	return 1;
}

int sie_serve(pid_t pid, struct sie_plan *p, const struct sie_opts *o, struct sie_state *s,
	      volatile int *stop, void (*ready)(const struct sie_state *s), char err[SIE_ERR_LEN])
{
	static struct target t;

	if (arm_attached(&t, pid, p, o, s, err))
		return -1;
	ready(s);
	target_resume(&t, 0);
	while (!*stop && target_alive(&t) && !t.execed)
		if (serve_one(&t, p, 1) && errno == ECHILD)
			break;
	if (ended(&t, err))
		return t.execed ? -1 : 0;
	return disarm_attached(&t, p, o, s, err);
}

/* One control line: "set NAME VALUE" (answered "ok NAME VALUE" or "err REASON") or "disarm". */
static int command(struct target *t, struct sie_plan *p, const struct sie_opts *o,
		   struct sie_state *s, const char *line, int out)
{
	char name[64], err[SIE_ERR_LEN] = "";
	long long v;

	if (!strcmp(line, "disarm")) {
		dprintf(out, "ok disarming\n");
		return 1;
	}
	if (sscanf(line, "set %63s %lld", name, &v) != 2)
		snprintf(err, sizeof(err), "malformed command '%.100s'", line);
	else if (!target_ended(t, err) && !sie_set_value(t, p, s, o, name, v, err))
		dprintf(out, "ok %s %lld\n", name, v);
	if (err[0])
		dprintf(out, "err %s\n", err);
	return 0;
}

/* Lines from a stream; returns 1 on "disarm", -1 at its end, else 0. */
static int stream_in(struct target *t, struct sie_plan *p, const struct sie_opts *o,
		     struct sie_state *s, int in, int out)
{
	static char buf[4096];
	static size_t have;
	char *nl;
	ssize_t n = read(in, buf + have, sizeof(buf) - 1 - have);
	int done = 0;

	if (n <= 0)
		return -1;
	have += (size_t)n;
	buf[have] = 0;
	while (!done && (nl = strchr(buf, '\n'))) {
		*nl = 0;
		done = command(t, p, o, s, buf, out);
		have -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, have + 1);
	}
	if (have == sizeof(buf) - 1)
		have = 0; /* an overlong line: dropped */
	return done;
}

/* One connection on the control socket: one command line, one reply. */
static int socket_in(struct target *t, struct sie_plan *p, const struct sie_opts *o,
		     struct sie_state *s, int lfd)
{
	char line[256];
	size_t n = 0;
	int c = accept(lfd, NULL, NULL), done = 0;

	if (c < 0)
		return 0;
	while (n < sizeof(line) - 1) {
		struct pollfd pfd = {.fd = c, .events = POLLIN};

		if (poll(&pfd, 1, 2000) <= 0 || read(c, line + n, 1) != 1 || line[n] == '\n')
			break;
		n++;
	}
	line[n] = 0;
	done = command(t, p, o, s, line, c);
	close(c);
	return done;
}

int sie_run(pid_t pid, struct sie_plan *p, const struct sie_opts *o, struct sie_state *s,
	    const struct sie_ctl *ctl, void (*ready)(const struct sie_state *s),
	    char err[SIE_ERR_LEN])
{
	static struct target t;
	struct sie_opts so = *o;
	sigset_t mask;
	int sfd, done = 0, more = 0;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		snprintf(err, SIE_ERR_LEN, "signalfd: %s", strerror(errno));
		return -1;
	}
	p->own_values = 1;
	so.pause = serve_pause;
	if (arm_attached(&t, pid, p, o, s, err))
		return -1;
	ready(s);
	if (ctl->share_values && sie_values_share(ctl->out, s, err))
		dprintf(ctl->out, "values none: %s\n", err); /* every change comes through us */
	target_resume(&t, 0);
	while (!done && target_alive(&t) && !t.execed) {
		struct pollfd fds[2] = {
			{.fd = ctl->listen_fd >= 0 ? ctl->listen_fd : ctl->in, .events = POLLIN},
			{.fd = sfd, .events = POLLIN}};
		struct signalfd_siginfo si;

		/* Events left over: their SIGCHLD was read already, so look without blocking. */
		if (poll(fds, 2, more ? 0 : -1) < 0 && errno != EINTR)
			break;
		while (read(sfd, &si, sizeof(si)) == sizeof(si))
			if (si.ssi_signo != SIGCHLD)
				done = 1;
		more = serve_pending(&t, p);
		if (done || !(fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (ctl->listen_fd >= 0)
			done = socket_in(&t, p, &so, s, ctl->listen_fd);
		else
			done = stream_in(&t, p, &so, s, ctl->in, ctl->out) != 0;
	}
	if (ended(&t, err))
		return -1;
	return disarm_attached(&t, p, o, s, err);
}
