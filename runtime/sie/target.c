// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

static int known(struct target *t, pid_t tid)
{
	for (int i = 0; i < t->nthreads; i++)
		if (t->threads[i].tid == tid)
			return 1;
	return 0;
}

/* A thread's state letter in /proc (R, S, t, Z, ...); 0 when it is gone. */
static char task_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

pid_t target_wait(struct target *t, pid_t tid, int *st)
{
	if (tid != t->pid)
		return waitpid(tid, st, __WALL);
	for (;;) {
		pid_t r = waitpid(tid, st, __WALL | WNOHANG);

		if (r)
			return r;
		/*
		 * A zombie leader runs no code again: with other threads left it is out of every
		 * span for good (it called pthread_exit), without them the process is dead.
		 */
		if (task_state(t->pid, tid) == 'Z') {
			errno = ESRCH;
			return -1;
		}
		nanosleep(&(struct timespec){0, 50000}, NULL);
	}
}

/*
 * Note one report of a thread's: 0 it is stopped (a signal that stopped it is kept for delivery on
 * resume; an event is handled), -1 it is gone, 1 not a stop.
 */
static int note_stop(struct target *t, struct thread *th, int st)
{
	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		th->gone = 1;
		return -1;
	}
	if (!WIFSTOPPED(st))
		return 1;
	if (st >> 16 && st >> 16 != PTRACE_EVENT_STOP)
		target_event(t, th->tid, st);
	else if (st >> 16 == 0 && WSTOPSIG(st) != SIGTRAP && !th->pending_sig)
		th->pending_sig = WSTOPSIG(st);
	return 0;
}

/* Wait for one thread's stop: 0 stopped, -1 gone. */
static int wait_stopped(struct target *t, struct thread *th)
{
	int st;

	for (;;) {
		if (target_wait(t, th->tid, &st) < 0) {
			if (errno == EINTR)
				continue;
			th->gone = 1;
			return -1;
		}
		if (note_stop(t, th, st) <= 0)
			return th->gone ? -1 : 0;
	}
}

/*
 * Stop one running thread: 0 stopped, -1 gone. A stop it has reported already is taken instead
 * of interrupting it: an INTERRUPT sent to a thread already in a stop stays pending and stops it
 * again before its first instruction when it is resumed, so a thread inside a safe span would
 * never leave it. (Any later stop clears such a pending INTERRUPT, so it costs one round at most.)
 */
static int stop_thread(struct target *t, struct thread *th)
{
	int st;
	pid_t r = waitpid(th->tid, &st, __WALL | WNOHANG);

	if (r == th->tid) {
		int n = note_stop(t, th, st);

		if (n <= 0)
			return n;
	}
	ptrace(PTRACE_INTERRUPT, th->tid, 0, 0);
	return wait_stopped(t, th);
}

static struct thread *add_thread(struct target *t, pid_t tid)
{
	struct thread *th;

	if (t->nthreads == TARGET_MAX_THREADS) {
		t->overflow = 1;
		return NULL;
	}
	th = &t->threads[t->nthreads++];
	memset(th, 0, sizeof(*th));
	th->tid = tid;
	return th;
}

/* A fork child: the spans' original bytes, then let go. Its only thread is stopped at fork's
 * return, outside every span. */
static void release_child(struct target *t, pid_t child, int restore)
{
	char path[64];
	int st, fd;

	int held = 0;

	for (int i = 0; i < t->nheld; i++)
		if (t->held[i] == child) {
			t->held[i] = t->held[--t->nheld];
			held = 1;
			break;
		}
	if (!held && waitpid(child, &st, __WALL) < 0)
		return;
	if (restore && t->plan) {
		snprintf(path, sizeof(path), "/proc/%d/mem", child);
		fd = open(path, O_RDWR | O_CLOEXEC);
		for (int i = 0; fd >= 0 && i < t->plan->nspans; i++) {
			const struct sie_span *sp = &t->plan->spans[i];

			if (sp->live)
				pwrite(fd, sp->expected, (size_t)sp->len, (off_t)sp->live);
		}
		if (fd >= 0)
			close(fd);
	}
	ptrace(PTRACE_DETACH, child, 0, 0);
}

void target_event(struct target *t, pid_t tid, int status)
{
	unsigned long msg = 0;
	struct thread *th;

	switch (status >> 16) {
	case PTRACE_EVENT_CLONE:
		if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg) || known(t, (pid_t)msg))
			return;
		th = add_thread(t, (pid_t)msg);
		if (th)
			wait_stopped(t, th);
		else
			ptrace(PTRACE_DETACH, (pid_t)msg, 0, 0);
		break;
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		if (!ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg))
			release_child(t, (pid_t)msg, status >> 16 == PTRACE_EVENT_FORK);
		break;
	case PTRACE_EVENT_EXEC:
		t->execed = 1;
		break;
	}
}

static pid_t tgid_of(pid_t tid)
{
	char path[64], line[128];
	int tgid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	fclose(f);
	return tgid;
}

void target_unknown_stop(struct target *t, pid_t tid)
{
	struct thread *th;

	if (tgid_of(tid) != t->pid) {
		if (t->nheld < (int)(sizeof(t->held) / sizeof(t->held[0])))
			t->held[t->nheld++] = tid; /* released at its parent's fork event */
		else
			ptrace(PTRACE_DETACH, tid, 0, 0);
		return;
	}
	th = add_thread(t, tid); /* its parent's clone event will find it known */
	if (!th)
		ptrace(PTRACE_DETACH, tid, 0, 0);
	else if (!t->holding)
		ptrace(PTRACE_CONT, tid, 0, 0);
}

int target_alive(const struct target *t)
{
	return target_live_index(t) >= 0;
}

int target_live_index(const struct target *t)
{
	for (int i = 0; i < t->nthreads; i++)
		if (!t->threads[i].gone)
			return i;
	return -1;
}

pid_t target_proc(const struct target *t)
{
	int i = target_live_index(t);

	return i < 0 ? t->pid : t->threads[i].tid;
}

void target_find_uprobes(struct target *t)
{
	struct sie_mapping m;
	FILE *f = sie_maps_open(target_proc(t));

	t->uprobes_lo = t->uprobes_hi = 0;
	if (!f)
		return;
	while (sie_maps_next(f, &m))
		if (!strcmp(m.name, "[uprobes]")) {
			t->uprobes_lo = m.start;
			t->uprobes_hi = m.end;
			break;
		}
	fclose(f);
}

int target_attach(struct target *t, pid_t pid, int zombie_leader_ok, char err[SIE_ERR_LEN])
{
	char path[64];
	int added, zombie_leader;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->mem_fd = -1;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	do {
		DIR *d = opendir(path);
		struct dirent *e;

		if (!d) {
			snprintf(err, SIE_ERR_LEN, "pid %d: no such process", pid);
			target_detach(t);
			return -1;
		}
		added = 0;
		while ((e = readdir(d))) {
			pid_t tid = atoi(e->d_name);
			struct thread *th;

			if (tid <= 0 || known(t, tid))
				continue;
			if (ptrace(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACECLONE))
				continue; /* exited meanwhile */
			th = add_thread(t, tid);
			if (!th) {
				ptrace(PTRACE_DETACH, tid, 0, 0);
				break;
			}
			ptrace(PTRACE_INTERRUPT, tid, 0, 0);
			wait_stopped(t, th);
			added++;
		}
		closedir(d);
	} while (added);
	t->start_time = sie_start_time(pid); /* read once seized: the pid is held from now on */
	if (t->overflow) {
		snprintf(err, SIE_ERR_LEN,
			 "refused: pid %d has more than %d threads, which the engine cannot check "
			 "for quiescence; nothing was changed",
			 pid, TARGET_MAX_THREADS);
		target_detach(t);
		return -1;
	}
	/* A zombie leader cannot be seized: the live threads make the process. */
	zombie_leader = task_state(pid, pid) == 'Z' && target_alive(t);
	if (zombie_leader && !zombie_leader_ok) {
		snprintf(err, SIE_ERR_LEN,
			 "refused: the main thread of pid %d has exited while other threads run; "
			 "arming reads the process through /proc/%d, which no longer shows its "
			 "executable or memory (arm before the main thread exits); nothing was "
			 "changed",
			 pid, pid);
		target_detach(t);
		return -1;
	}
	if (!zombie_leader && (!t->nthreads || t->threads[0].tid != pid || t->threads[0].gone)) {
		snprintf(err, SIE_ERR_LEN, "pid %d: cannot attach (exited, or not permitted)", pid);
		target_detach(t);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", target_proc(t));
	t->mem_fd = open(path, O_RDWR | O_CLOEXEC);
	if (t->mem_fd < 0) {
		snprintf(err, SIE_ERR_LEN, "%s: %s", path, strerror(errno));
		target_detach(t);
		return -1;
	}
	return 0;
}

int target_resume(struct target *t, int busy_only)
{
	for (int i = 0; i < t->nthreads; i++) {
		struct thread *th = &t->threads[i];

		if (busy_only && !th->busy)
			continue;
		if (!th->gone && ptrace(PTRACE_CONT, th->tid, 0, th->pending_sig))
			th->gone = 1;
		th->pending_sig = 0;
	}
	return 0;
}

int target_stop(struct target *t, int busy_only, char err[SIE_ERR_LEN])
{
	/*
	 * Threads a clone event adds meanwhile (while a creator's stop is waited for) are stopped
	 * already and their stop consumed: an INTERRUPT would never be reported, and waiting for
	 * one would hang the engine with the whole process stopped.
	 */
	int n = t->nthreads;

	for (int i = 0; i < n; i++) {
		struct thread *th = &t->threads[i];

		if (!th->gone && (!busy_only || th->busy))
			stop_thread(t, th);
	}
	/* An exec by the thread let run (a stopped one's comes at its stop) ends the change. */
	return target_ended(t, err) ? -1 : 0;
}

int target_ended(const struct target *t, char err[SIE_ERR_LEN])
{
	if (t->execed)
		snprintf(err, SIE_ERR_LEN,
			 "pid %d called exec: its new program runs unpatched; the engine let it go",
			 t->pid);
	else if (!target_alive(t))
		snprintf(err, SIE_ERR_LEN, "pid %d exited", t->pid);
	else
		return 0;
	return 1;
}

void target_detach(struct target *t)
{
	for (int i = 0; i < t->nthreads; i++)
		if (!t->threads[i].gone)
			ptrace(PTRACE_DETACH, t->threads[i].tid, 0, t->threads[i].pending_sig);
	t->nthreads = 0;
	if (t->mem_fd >= 0)
		close(t->mem_fd);
	t->mem_fd = -1;
}

int target_read(struct target *t, uint64_t addr, void *buf, size_t len)
{
	return pread(t->mem_fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

int target_write(struct target *t, uint64_t addr, const void *buf, size_t len)
{
	return pwrite(t->mem_fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

int target_regs(struct target *t, int i, struct user_regs_struct *r)
{
	return ptrace(PTRACE_GETREGS, t->threads[i].tid, 0, r) ? -1 : 0;
}

long target_syscall(struct target *t, long nr, long a1, long a2, long a3, long a4, long a5, long a6,
		    char err[SIE_ERR_LEN])
{
	static const uint8_t code[] = {0x0f, 0x05, 0xcc}; /* syscall; int3 */
	struct user_regs_struct saved, r;
	uint8_t orig[sizeof(code)];
	struct thread *th = NULL;
	uint64_t site;
	long ret;
	int st;

	for (int i = 0; i < t->nthreads && !th; i++)
		if (!t->threads[i].gone)
			th = &t->threads[i];
	if (!th || ptrace(PTRACE_GETREGS, th->tid, 0, &saved)) {
		snprintf(err, SIE_ERR_LEN, "pid %d: no thread to run a system call", t->pid);
		return -ESRCH;
	}
	site = t->syscall_site ? t->syscall_site : saved.rip;
	if (target_read(t, site, orig, sizeof(orig)) || target_write(t, site, code, sizeof(code))) {
		snprintf(err, SIE_ERR_LEN, "pid %d: cannot write at %#lx to run a system call",
			 t->pid, site);
		return -EFAULT;
	}
	r = saved;
	r.rip = site;
	r.rax = nr;
	r.orig_rax = -1; /* not inside a system call: no restart logic on resume */
	r.rdi = a1;
	r.rsi = a2;
	r.rdx = a3;
	r.r10 = a4;
	r.r8 = a5;
	r.r9 = a6;
	ret = -EIO;
	if (!ptrace(PTRACE_SETREGS, th->tid, 0, &r) && !ptrace(PTRACE_CONT, th->tid, 0, 0)) {
		for (;;) {
			if (target_wait(t, th->tid, &st) < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
				th->gone = 1;
				snprintf(err, SIE_ERR_LEN, "pid %d exited during a system call",
					 t->pid);
				return -ESRCH;
			}
			if (WIFSTOPPED(st) && st >> 16 == 0 && WSTOPSIG(st) == SIGTRAP)
				break; /* our int3 (an event stop is not: the call may not have run)
					*/
			if (WIFSTOPPED(st) &&
			    st >> 16 == 0) /* a signal: keep it, let the call run */
				th->pending_sig = WSTOPSIG(st);
			ptrace(PTRACE_CONT, th->tid, 0, 0);
		}
		if (!ptrace(PTRACE_GETREGS, th->tid, 0, &r))
			ret = (long)r.rax;
	}
	target_write(t, site, orig, sizeof(orig));
	ptrace(PTRACE_SETREGS, th->tid, 0, &saved);
	if (ret < 0 && ret > -4096)
		snprintf(err, SIE_ERR_LEN, "system call %ld in pid %d: %s", nr, t->pid,
			 strerror(-ret));
	return ret;
}
