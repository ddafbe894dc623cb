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
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
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

static struct thread *add(struct target *t, pid_t tid)
{
	struct thread *th = find(t, tid);

	if (th || t->nthreads == TARGET_MAX_THREADS)
		return th;
	th = &t->threads[t->nthreads++];
	memset(th, 0, sizeof(*th));
	th->tid = tid;
	return th;
}

/* Handle one ptrace event; a breakpoint hit is sent to its trampoline. Returns -1 when idle. */
static int serve_one(struct target *t, const struct sie_plan *p, int block)
{
	struct user_regs_struct r;
	struct thread *th;
	unsigned long msg;
	int st, sig = 0;
	pid_t tid = waitpid(-1, &st, __WALL | (block ? 0 : WNOHANG));

	if (tid <= 0)
		return -1;
	th = add(t, tid);
	if (!th)
		return 0;
	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		th->gone = 1;
		return 0;
	}
	if (st >> 16 == PTRACE_EVENT_CLONE) {
		if (!ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg))
			add(t, (pid_t)msg);
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

/* Between attempts to quiesce: keep serving breakpoints for about a millisecond. */
static void serve_pause(struct target *t, const struct sie_plan *p)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		if (serve_one(t, p, 0))
			nanosleep(&(struct timespec){0, 50000}, NULL);
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000000000l + (b.tv_nsec - a.tv_nsec) < 1000000);
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
			    waitpid(th->tid, &st, __WALL) < 0 || !WIFSTOPPED(st)) {
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

int sie_serve(pid_t pid, struct sie_plan *p, const struct sie_opts *o, struct sie_state *s,
	      volatile int *stop, void (*ready)(const struct sie_state *s), char err[SIE_ERR_LEN])
{
	static struct target t;
	struct sie_opts so = *o;

	memset(s, 0, sizeof(*s));
	s->pid = pid;
	if (sie_find_bias(pid, p->load_vaddr, &s->bias, err) || target_attach(&t, pid, err))
		return -1;
	if (sie_arm_stopped(&t, p, o, s, err)) {
		target_detach(&t);
		return -1;
	}
	for (int i = 0; i < t.nthreads; i++)
		ptrace(PTRACE_SETOPTIONS, t.threads[i].tid, 0, PTRACE_O_TRACECLONE);
	s->server = getpid();
	ready(s);
	target_resume(&t, 0);
	while (!*stop && !t.threads[0].gone)
		if (serve_one(&t, p, 1) && errno == ECHILD)
			break;
	if (t.threads[0].gone) {
		snprintf(err, SIE_ERR_LEN, "pid %d exited", pid);
		return 0;
	}
	/* Disarm: quiesce while still serving hits, restore the bytes, detach. */
	so.pause = serve_pause;
	so.timeout_ms = o->timeout_ms * 10;
	if (target_stop(&t, 0, err) || sie_disarm_stopped(&t, p, &so, s, err)) {
		target_detach(&t);
		return -1;
	}
	drain_traps(&t, p);
	target_detach(&t);
	return 0;
}
