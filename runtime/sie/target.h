/* SPDX-License-Identifier: MIT */
/* A ptrace-stopped process: its threads, its memory, and system calls made on its behalf. */
#ifndef XTUNE_SIE_TARGET_H
#define XTUNE_SIE_TARGET_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "sie.h"

#define TARGET_MAX_THREADS 1024

struct thread {
	pid_t tid;
	int pending_sig; /* a signal that arrived while stopped: delivered on resume/detach */
	int gone;
	int busy; /* inside a safe span at the last check: the only threads quiesce lets run */
};

struct target {
	pid_t pid;
	unsigned long long
		start_time; /* /proc/pid/stat field 22: tells this process from a reuse */
	int mem_fd;	    /* /proc/pid/mem */
	struct thread threads[TARGET_MAX_THREADS];
	int nthreads;
	int overflow; /* a thread past TARGET_MAX_THREADS was created: it cannot be checked */
	int execed;   /* the process called exec: its new program is not ours to patch */
	int holding;  /* the world is stopped for a change: new threads stay stopped too */
	const struct sie_plan *plan; /* spans restored in fork children (set once armed) */
	pid_t held[16];		     /* fork children whose stop came before their parent's event */
	int nheld;
	/*
	 * Where system calls are injected: 3 bytes of the target's own text (a span's first bytes,
	 * set by the engine). A thread's pc may be in a page ptrace cannot write, e.g. the kernel's
	 * uretprobe trampoline.
	 */
	uint64_t syscall_site;
	/*
	 * The kernel's [uprobes] page (0, 0 when absent). A function under a uretprobe returns
	 * through it: the real return address is held by the kernel, out of the stack scan's sight.
	 */
	uint64_t uprobes_lo, uprobes_hi;
};

/*
 * Seize and stop every thread (including ones created meanwhile, followed through clone). A main
 * thread that has exited while others run (pthread_exit) is refused unless `zombie_leader_ok`
 * (disarm): the memory is then reached through a live thread.
 */
int target_attach(struct target *t, pid_t pid, int zombie_leader_ok, char err[SIE_ERR_LEN]);
/*
 * waitpid for one thread of the target. The kernel reports a group leader's exit only once every
 * other thread's exit was reaped: waiting for the leader ends (-1, ESRCH) once it is a zombie, so
 * that neither a process killed meanwhile nor a leader that called pthread_exit while other
 * threads run keeps the engine waiting forever (the leader then counts as gone: it runs no code).
 */
pid_t target_wait(struct target *t, pid_t tid, int *st);
/* Resume / stop every thread, or with `busy_only` only the threads marked busy. */
int target_resume(struct target *t, int busy_only);
int target_stop(struct target *t, int busy_only, char err[SIE_ERR_LEN]);
void target_detach(struct target *t);
/*
 * A ptrace event stop of thread `tid` (clone, fork, vfork, exec): a new thread is added and left
 * stopped; a fork child gets the original bytes back and is let go (it runs unpatched); a vfork
 * child shares the memory and is let go; exec is recorded.
 */
void target_event(struct target *t, pid_t tid, int status);
/* A stop of a task we do not know: a new thread is added, a fork child is held for its event. */
void target_unknown_stop(struct target *t, pid_t tid);
/* The process exited or called exec (its new program is not ours): 1, with which in err. */
int target_ended(const struct target *t, char err[SIE_ERR_LEN]);
/* Some thread has not exited: the process lives (its leader may have called pthread_exit). */
int target_alive(const struct target *t);
/* The index of the first thread that has not exited, -1 when none is left. */
int target_live_index(const struct target *t);
/*
 * The task whose /proc entries show the process: the leader, or once it exited (a zombie leader's
 * maps, exe and fd are gone with its memory) the first live thread; any thread's /proc/TID shows
 * the whole process.
 */
pid_t target_proc(const struct target *t);
/* Read the range of the kernel's [uprobes] page into t (it appears at the first uprobe hit). */
void target_find_uprobes(struct target *t);

int target_read(struct target *t, uint64_t addr, void *buf, size_t len);
int target_write(struct target *t, uint64_t addr, const void *buf, size_t len);
int target_regs(struct target *t, int i, struct user_regs_struct *r);

/*
 * A system call in the first live thread, run at t->syscall_site (or the thread's pc when unset);
 * returns the kernel's result (-errno on failure).
 */
long target_syscall(struct target *t, long nr, long a1, long a2, long a3, long a4, long a5, long a6,
		    char err[SIE_ERR_LEN]);

/* The engine's steps on an already stopped target (engine.c), used by the int3 server. */
int sie_find_bias(pid_t pid, const struct sie_plan *p, uint64_t *bias, char err[SIE_ERR_LEN]);
int sie_arm_stopped(struct target *t, struct sie_plan *p, const struct sie_opts *o,
		    struct sie_state *s, char err[SIE_ERR_LEN]);
/* Stop the world at a moment when no thread is inside a span group or a trampoline. */
int sie_quiesce(struct target *t, const struct sie_plan *p, const struct sie_state *s,
		const struct sie_opts *o, char err[SIE_ERR_LEN]);
/* The value words shared with the target (values.c); a store is one atomic 8-byte write. */
int sie_values_map(struct target *t, const struct sie_plan *p, struct sie_state *s,
		   char err[SIE_ERR_LEN]);
void sie_values_store(const struct sie_state *s, int k, int64_t v);
void sie_values_unmap(struct sie_state *s);
/* Hand the value page to the controller: a line "values" carrying its memfd (see sie_ctl). */
int sie_values_share(int sock, const struct sie_state *s, char err[SIE_ERR_LEN]);
/* Change a perf-const's engine-owned value with a transition (transition.c). */
int sie_set_value(struct target *t, const struct sie_plan *p, const struct sie_state *s,
		  const struct sie_opts *o, const char *name, int64_t v, char err[SIE_ERR_LEN]);
int sie_disarm_stopped(struct target *t, struct sie_plan *p, const struct sie_opts *o,
		       struct sie_state *s, char err[SIE_ERR_LEN]);

#endif /* XTUNE_SIE_TARGET_H */
