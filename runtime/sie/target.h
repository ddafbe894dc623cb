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
	int mem_fd; /* /proc/pid/mem */
	struct thread threads[TARGET_MAX_THREADS];
	int nthreads;
};

/* Seize and stop every thread (including ones created meanwhile). */
int target_attach(struct target *t, pid_t pid, char err[SIE_ERR_LEN]);
/* Resume / stop every thread, or with `busy_only` only the threads marked busy. */
int target_resume(struct target *t, int busy_only);
int target_stop(struct target *t, int busy_only, char err[SIE_ERR_LEN]);
void target_detach(struct target *t);

int target_read(struct target *t, uint64_t addr, void *buf, size_t len);
int target_write(struct target *t, uint64_t addr, const void *buf, size_t len);
int target_regs(struct target *t, int i, struct user_regs_struct *r);

/* A system call in the first live thread; returns the kernel's result (-errno on failure). */
long target_syscall(struct target *t, long nr, long a1, long a2, long a3, long a4, long a5, long a6,
		    char err[SIE_ERR_LEN]);

/* The engine's steps on an already stopped target (engine.c), used by the int3 server. */
int sie_find_bias(pid_t pid, uint64_t load_vaddr, uint64_t *bias, char err[SIE_ERR_LEN]);
int sie_arm_stopped(struct target *t, struct sie_plan *p, const struct sie_opts *o,
		    struct sie_state *s, char err[SIE_ERR_LEN]);
int sie_disarm_stopped(struct target *t, struct sie_plan *p, const struct sie_opts *o,
		       struct sie_state *s, char err[SIE_ERR_LEN]);

#endif /* XTUNE_SIE_TARGET_H */
