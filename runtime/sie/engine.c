// SPDX-License-Identifier: MIT
/* Arm and disarm: live-byte checks, the trampoline page, the knob mapping, quiescence, patching. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "xtune/knob.h"
#include "sie.h"
#include "target.h"

#define PAGE	      4096ul
#define STACK_SCAN    (64 * 1024)
#define TRAMP_ALIGN   16
#define NEAR_DISTANCE (1ul << 30) /* keep trampolines well inside rel32 reach of the text */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * The load bias of the main executable: start of its offset-0 mapping minus its first PT_LOAD;
 * of the plan's shared library when it names one.
 */
int sie_find_bias(pid_t pid, const struct sie_plan *p, uint64_t *bias, char err[SIE_ERR_LEN])
{
	char path[64], exe[SIE_PATH_LEN];
	struct sie_mapping m;
	ssize_t n;
	FILE *f;

	if (p->library[0])
		return sie_find_library(pid, p, bias, err);
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n < 0) {
		snprintf(err, SIE_ERR_LEN, "pid %d: %s: %s", pid, path, strerror(errno));
		return -1;
	}
	exe[n] = 0;
	f = sie_maps_open(pid);
	if (!f) {
		snprintf(err, SIE_ERR_LEN, "pid %d: no such process", pid);
		return -1;
	}
	while (sie_maps_next(f, &m))
		if (m.offset == 0 && !strcmp(m.name, exe)) {
			fclose(f);
			*bias = m.start - p->load_vaddr;
			return 0;
		}
	fclose(f);
	snprintf(err, SIE_ERR_LEN, "pid %d: %s is not mapped", pid, exe);
	return -1;
}

/*
 * A free, page-aligned address within NEAR_DISTANCE below (or above) `near`: the one after
 * `skip` others (those refused by the target's mmap).
 */
static uint64_t find_gap(pid_t pid, uint64_t near, uint64_t size, int skip)
{
	uint64_t starts[4096], ends[4096], cand;
	struct sie_mapping m;
	int n = 0, ok;
	FILE *f = sie_maps_open(pid);

	if (!f)
		return 0;
	for (; n < 4096 && sie_maps_next(f, &m); n++) {
		starts[n] = m.start;
		ends[n] = m.end;
	}
	fclose(f);
	for (uint64_t d = 2 * 1024 * 1024; d < NEAR_DISTANCE; d += 2 * 1024 * 1024) {
		for (int dir = 0; dir < 2; dir++) {
			cand = dir ? near + d : near - d - size;
			cand &= ~(PAGE - 1);
			ok = cand > 0x10000;
			for (int i = 0; i < n && ok; i++)
				if (cand < ends[i] && cand + size > starts[i])
					ok = 0;
			if (ok && skip-- == 0)
				return cand;
		}
	}
	return 0;
}

static int in_ranges(const struct sie_plan *p, uint64_t bias, uint64_t a, const char **name)
{
	for (int i = 0; i < p->nspans; i++) {
		const struct sie_span *sp = &p->spans[i];

		/* Never stop a thread between the first and last byte of a patched span. */
		if (a > sp->vaddr + bias && a < sp->vaddr + bias + sp->len) {
			*name = sp->name;
			return 1;
		}
		/*
		 * At its first byte a span whose safe span starts there (a slice beginning at the
		 * span, or the whole function when the span is its entry) has nothing in flight.
		 */
		if (a == sp->vaddr + bias && sp->safe[0][0] == sp->vaddr)
			continue;
		for (int k = 0; k < sp->nsafe; k++)
			if (a >= sp->safe[k][0] + bias && a < sp->safe[k][1] + bias) {
				*name = sp->name;
				return 1;
			}
	}
	return 0;
}

/*
 * A pc or stack word in the kernel's [uprobes] page: a uretprobe replaced a return address there
 * and the kernel keeps the real one. When a safe span holds a return address (a call inside it),
 * the hidden one may be it, and the thread counts as busy until it has returned.
 */
static int hidden_return(const struct target *t, const struct sie_plan *p, uint64_t a)
{
	return p->returns_in_safe != 0 && a >= t->uprobes_lo && a < t->uprobes_hi;
}

static int in_trampolines(const struct sie_state *s, uint64_t a)
{
	return a >= s->tramp_addr && a < s->tramp_addr + s->tramp_size;
}

/*
 * Why thread i counts as inside a safe span (its pc, or a return address found by scanning its
 * stack), a trampoline, or a uretprobe that may hide one; 0 when it does not. The stack scan is
 * conservative: a stale word only causes a retry.
 */
static int thread_busy(struct target *t, int i, const struct sie_plan *p, const struct sie_state *s,
		       char *why, size_t whylen)
{
	static uint64_t stack[STACK_SCAN / 8];
	int tid = t->threads[i].tid;
	struct user_regs_struct r;
	const char *name = "(trampoline)";
	size_t got;

	if (target_regs(t, i, &r)) {
		/* Exiting (a kill while stopped): never count it out unseen; the next stop tells.
		 */
		snprintf(why, whylen, "thread %d: its registers cannot be read", tid);
		return 1;
	}
	if (hidden_return(t, p, r.rip)) {
		snprintf(why, whylen,
			 "thread %d is at %#llx, in the kernel's uretprobe trampoline (where it "
			 "returns to is out of sight)",
			 tid, r.rip);
		return 1;
	}
	if (in_ranges(p, s->bias, r.rip, &name) || in_trampolines(s, r.rip)) {
		snprintf(why, whylen, "thread %d is at %#llx, inside a safe span of %s", tid, r.rip,
			 name);
		return 1;
	}
	for (got = STACK_SCAN; got >= 4096; got /= 2)
		if (!target_read(t, r.rsp & ~7ull, stack, got))
			break;
	for (size_t k = 0; got >= 4096 && k < got / 8; k++) {
		if (hidden_return(t, p, stack[k])) {
			snprintf(
				why, whylen,
				"thread %d returns through the kernel's uretprobe trampoline (%#lx "
				"on its stack): the return address it stands for is out of sight",
				tid, stack[k]);
			return 1;
		}
		if (in_ranges(p, s->bias, stack[k], &name) || in_trampolines(s, stack[k])) {
			snprintf(why, whylen,
				 "thread %d has a return address %#lx in a safe span of %s", tid,
				 stack[k], name);
			return 1;
		}
	}
	return 0;
}

/* Mark the threads thread_busy finds; returns how many (`why` tells of the last one). */
static int busy(struct target *t, const struct sie_plan *p, const struct sie_state *s, char *why,
		size_t whylen)
{
	int n = 0;

	for (int i = 0; i < t->nthreads; i++) {
		struct thread *th = &t->threads[i];

		th->busy = !th->gone && thread_busy(t, i, p, s, why, whylen);
		n += th->busy;
	}
	return n;
}

/*
 * A thread stopped right after one of our int3 patches has not run the span yet: step it back
 * onto the int3, so that it runs the span again (patched: through its trampoline; restored: the
 * original instructions).
 */
static void rewind_traps(struct target *t, const struct sie_plan *p)
{
	for (int i = 0; i < t->nthreads; i++) {
		struct user_regs_struct r;

		if (t->threads[i].gone || target_regs(t, i, &r))
			continue;
		for (int k = 0; k < p->nspans; k++) {
			const struct sie_span *sp = &p->spans[k];

			if (sp->patch == SIE_PATCH_INT3 && sp->live && r.rip == sp->live + 1) {
				r.rip = sp->live;
				ptrace(PTRACE_SETREGS, t->threads[i].tid, 0, &r);
			}
		}
	}
}

/*
 * Stop the world at a moment when no thread is in a safe span. Threads outside stay stopped
 * while the ones inside run on until they leave (or the time is up: refused, nothing changed).
 */
int sie_quiesce(struct target *t, const struct sie_plan *p, const struct sie_state *s,
		const struct sie_opts *o, char err[SIE_ERR_LEN])
{
	uint64_t deadline = now_ms() + (uint64_t)o->timeout_ms;
	char why[256];
	unsigned int tries = 0;

	rewind_traps(t, p);
	target_find_uprobes(t);
	while (busy(t, p, s, why, sizeof(why))) {
		if (now_ms() >= deadline) {
			snprintf(
				err, SIE_ERR_LEN,
				"refused: %s for longer than %d ms (%u tries); nothing was changed",
				why, o->timeout_ms, tries);
			return -1;
		}
		target_resume(t, 1);
		if (o->pause)
			o->pause(t, p);
		else
			usleep(200 + (unsigned int)(rand() % 800));
		if (target_stop(t, 1, err))
			return -1;
		rewind_traps(t, p);
		target_find_uprobes(t); /* the page appears at a process's first uprobe hit */
		tries++;
	}
	return 0;
}

static int check_bytes(struct target *t, const struct sie_plan *p, uint64_t bias, int want_orig,
		       char err[SIE_ERR_LEN])
{
	uint8_t live[SIE_MAX_BYTES];

	for (int i = 0; i < p->nspans; i++) {
		const struct sie_span *sp = &p->spans[i];

		if (target_read(t, sp->vaddr + bias, live, (size_t)sp->len)) {
			snprintf(err, SIE_ERR_LEN, "span of %s at %#lx: cannot read the live bytes",
				 sp->name, sp->vaddr + bias);
			return -1;
		}
		if (want_orig && memcmp(live, sp->expected, (size_t)sp->len)) {
			char a[64] = "", b[64] = "";
			int trap = -1;

			for (int k = 0; k < sp->len && k < 12; k++) {
				sprintf(a + 2 * k, "%02x", live[k]);
				sprintf(b + 2 * k, "%02x", sp->expected[k]);
			}
			for (int k = 0; k < sp->len && trap < 0; k++)
				if (live[k] != sp->expected[k])
					trap = live[k] == 0xcc ? k : sp->len;
			if (trap >= 0 && trap < sp->len) {
				snprintf(err, SIE_ERR_LEN,
					 "refused: span of %s at vaddr %#lx has a breakpoint "
					 "(int3) at "
					 "+%d, where the scope table has %02x: a uprobe or a "
					 "debugger is "
					 "on this code; detach it (or probe another instruction) "
					 "and retry",
					 sp->name, sp->vaddr, trap, sp->expected[trap]);
				return -1;
			}
			snprintf(err, SIE_ERR_LEN,
				 "refused: span of %s at vaddr %#lx: live bytes %s differ from the "
				 "scope "
				 "table's %s (another build of the binary, or already patched)",
				 sp->name, sp->vaddr, a, b);
			return -1;
		}
	}
	return 0;
}

static void patch_bytes(const struct sie_span *sp, uint8_t *out)
{
	memset(out, 0xcc, (size_t)sp->len);
	if (sp->patch == SIE_PATCH_JUMP) {
		int32_t rel = (int32_t)(sp->tramp_live - (sp->live + 5));

		out[0] = 0xe9;
		memcpy(out + 1, &rel, 4);
	}
}

/* Lay the trampolines out in one buffer, relocated for where they will live. */
static uint64_t build_page(struct sie_plan *p, struct sie_state *s, uint8_t *page)
{
	uint64_t off = 0;

	for (int i = 0; i < p->nspans; i++) {
		struct sie_span *sp = &p->spans[i];
		uint8_t *code = page + off;
		int32_t back;

		sp->live = sp->vaddr + s->bias;
		sp->tramp_live = s->tramp_addr + off;
		memcpy(code, sp->tramp, (size_t)sp->tramp_len);
		for (int k = 0; k < sp->nrelocs; k++) {
			const struct sie_reloc_ent *r = &sp->relocs[k];

			if (r->kind == SIE_RELOC_KNOB) {
				uint64_t a =
					p->own_values
						? s->values_addr + 8 * (uint64_t)sp->cidx
						: s->knob_addr + XT_KNOB_SLOT_OFFSET(sp->slot) +
							  __builtin_offsetof(struct xt_knob_slot,
									     applied);
				memcpy(code + r->offset, &a, 8);
			} else {
				int32_t rel = (int32_t)(r->target + s->bias -
							(sp->tramp_live + r->offset + 4));
				memcpy(code + r->offset, &rel, 4);
			}
		}
		code[sp->tramp_len] = 0xe9; /* jmp back to the end of the span */
		back = (int32_t)(sp->live + (uint64_t)sp->len -
				 (sp->tramp_live + (uint64_t)sp->tramp_len + 5));
		memcpy(code + sp->tramp_len + 1, &back, 4);
		off += ((uint64_t)sp->tramp_len + 5 + TRAMP_ALIGN - 1) &
		       ~(uint64_t)(TRAMP_ALIGN - 1);
	}
	return off;
}

static uint64_t page_bytes(const struct sie_plan *p)
{
	uint64_t n = 0;

	for (int i = 0; i < p->nspans; i++)
		n += ((uint64_t)p->spans[i].tramp_len + 5 + TRAMP_ALIGN - 1) & ~(TRAMP_ALIGN - 1ul);
	return (n + PAGE - 1) & ~(PAGE - 1);
}

/* The trampolines, then (engine-owned values) one page of value words, one per perf-const. */
static uint64_t map_bytes(const struct sie_plan *p)
{
	return page_bytes(p) + (p->own_values ? PAGE : 0);
}

/* Every span has a `const` line, whose original value starts in its word. */
static int init_values(struct target *t, const struct sie_plan *p, struct sie_state *s,
		       char err[SIE_ERR_LEN])
{
	s->values_addr = s->tramp_addr + page_bytes(p);
	for (int i = 0; i < p->nspans; i++)
		if (p->spans[i].cidx < 0) {
			snprintf(err, SIE_ERR_LEN, "plan: span of %s has no `const` line",
				 p->spans[i].name);
			return -1;
		}
	return sie_values_map(t, p, s, err);
}

static void unmap_remote(struct target *t, struct sie_state *s)
{
	char ignore[SIE_ERR_LEN];

	if (s->tramp_addr)
		target_syscall(t, SYS_munmap, (long)s->tramp_addr, (long)s->tramp_size, 0, 0, 0, 0,
			       ignore);
	if (s->knob_addr)
		target_syscall(t, SYS_munmap, (long)s->knob_addr, (long)s->knob_size, 0, 0, 0, 0,
			       ignore);
	s->tramp_addr = s->knob_addr = 0;
	sie_values_unmap(s);
}

/* Map the knob table read-only into the target: open it there, mmap, close. */
static int map_knobs(struct target *t, const struct sie_plan *p, struct sie_state *s,
		     char err[SIE_ERR_LEN])
{
	struct user_regs_struct r;
	uint64_t where;
	long fd, addr;

	if (target_live_index(t) < 0 || target_regs(t, target_live_index(t), &r))
		return -1;
	where = (r.rsp - 8192) & ~15ull; /* far below the red zone of the stopped thread */
	if (target_write(t, where, p->knobs, strlen(p->knobs) + 1)) {
		snprintf(err, SIE_ERR_LEN, "pid %d: cannot write to its stack", t->pid);
		return -1;
	}
	/*
	 * O_NOFOLLOW: the table itself, never what a link put in its place names (the open runs
	 * with the target's credentials, inside its mount namespace).
	 */
	fd = target_syscall(t, SYS_openat, AT_FDCWD, (long)where, O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
			    0, 0, 0, err);
	if (fd == -ELOOP) {
		snprintf(err, SIE_ERR_LEN,
			 "refused: the knob table %s is a symbolic link (pid %d would map what it "
			 "names): give the plan the table's own path",
			 p->knobs, t->pid);
		return -1;
	}
	if (fd < 0) {
		snprintf(err, SIE_ERR_LEN, "pid %d cannot open the knob table %s: %s", t->pid,
			 p->knobs, strerror((int)-fd));
		return -1;
	}
	addr = target_syscall(t, SYS_mmap, 0, (long)p->knobs_size, PROT_READ, MAP_SHARED, fd, 0,
			      err);
	target_syscall(t, SYS_close, fd, 0, 0, 0, 0, 0, err);
	if (addr < 0 && addr > -4096) {
		snprintf(err, SIE_ERR_LEN, "pid %d: mmap of %s: %s", t->pid, p->knobs,
			 strerror((int)-addr));
		return -1;
	}
	s->knob_addr = (uint64_t)addr;
	s->knob_size = p->knobs_size;
	return 0;
}

static int map_trampolines(struct target *t, const struct sie_plan *p, struct sie_state *s,
			   char err[SIE_ERR_LEN])
{
	uint64_t size = map_bytes(p), cand;
	long addr;

	for (int attempt = 0; attempt < 8; attempt++) {
		cand = find_gap(target_proc(t), p->spans[0].vaddr + s->bias, size, attempt);
		if (!cand) {
			snprintf(err, SIE_ERR_LEN, "its memory map has no gap there");
			break;
		}
		addr = target_syscall(t, SYS_mmap, (long)cand, (long)size, PROT_READ | PROT_EXEC,
				      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0,
				      err);
		if (addr == (long)cand) {
			s->tramp_addr = cand;
			s->tramp_size = size;
			return 0;
		}
		if (addr > 0)
			target_syscall(t, SYS_munmap, addr, (long)size, 0, 0, 0, 0, err);
		else if (addr != -EEXIST)
			break; /* not a race with another mapping: err says what */
	}
	{
		char why[SIE_ERR_LEN];

		snprintf(why, sizeof(why), "%s", err);
		snprintf(
			err, SIE_ERR_LEN,
			"pid %d: no free address within 1 GiB of the text for trampolines (%.160s)",
			t->pid, why);
	}
	return -1;
}

static int spans_reachable(const struct sie_plan *p, const struct sie_state *s,
			   char err[SIE_ERR_LEN])
{
	for (int i = 0; i < p->nspans; i++) {
		int64_t d = (int64_t)(s->tramp_addr - (p->spans[i].vaddr + s->bias));

		if (d > (1l << 31) - 65536 || d < -(1l << 31) + 65536) {
			snprintf(err, SIE_ERR_LEN, "span of %s: trampoline out of rel32 reach",
				 p->spans[i].name);
			return -1;
		}
	}
	return 0;
}

int sie_arm_stopped(struct target *t, struct sie_plan *p, const struct sie_opts *o,
		    struct sie_state *s, char err[SIE_ERR_LEN])
{
	static uint8_t page[SIE_MAX_SPANS * (SIE_MAX_BYTES + 32)];
	uint8_t patch[SIE_MAX_BYTES];
	int i;

	s->start_time = t->start_time;
	/* System calls run at the first span, whose bytes check_bytes finds original first. */
	t->syscall_site = p->spans[0].vaddr + s->bias;
	if (sie_check_identity(target_proc(t), p, s->bias, err) ||
	    check_bytes(t, p, s->bias, 1, err) || (!p->own_values && map_knobs(t, p, s, err)) ||
	    map_trampolines(t, p, s, err) || spans_reachable(p, s, err) ||
	    (p->own_values && init_values(t, p, s, err)))
		goto undo;
	memset(page, 0xcc, sizeof(page));
	build_page(p, s, page);
	if (target_write(t, s->tramp_addr, page, page_bytes(p))) {
		snprintf(err, SIE_ERR_LEN, "pid %d: cannot write the trampoline page", t->pid);
		goto undo;
	}
	if (sie_quiesce(t, p, s, o, err) || check_bytes(t, p, s->bias, 1, err))
		goto undo;
	for (i = 0; i < p->nspans; i++) {
		patch_bytes(&p->spans[i], patch);
		if (target_write(t, p->spans[i].live, patch, (size_t)p->spans[i].len))
			break;
	}
	if (i < p->nspans) {
		snprintf(err, SIE_ERR_LEN, "pid %d: writing span %d failed", t->pid, i);
		while (i-- > 0)
			target_write(t, p->spans[i].live, p->spans[i].expected,
				     (size_t)p->spans[i].len);
		goto undo;
	}
	return 0;
undo:
	if (target_alive(t))
		unmap_remote(t, s);
	return -1;
}

int sie_arm(pid_t pid, struct sie_plan *p, const struct sie_opts *o, struct sie_state *s,
	    char err[SIE_ERR_LEN])
{
	static struct target t;
	int rc;

	memset(s, 0, sizeof(*s));
	s->pid = pid;
	/* Attached first: a main thread that has exited is refused with that reason. */
	if (target_attach(&t, pid, 0, err))
		return -1;
	rc = sie_find_bias(pid, p, &s->bias, err) || sie_arm_stopped(&t, p, o, s, err) ? -1 : 0;
	target_detach(&t);
	return rc;
}

int sie_disarm_stopped(struct target *t, struct sie_plan *p, const struct sie_opts *o,
		       struct sie_state *s, char err[SIE_ERR_LEN])
{
	static uint8_t scratch[SIE_MAX_SPANS * (SIE_MAX_BYTES + 32)];
	uint8_t live[SIE_MAX_BYTES], patch[SIE_MAX_BYTES];

	build_page(p, s, scratch); /* recomputes each span's live and trampoline addresses */
	t->syscall_site = p->spans[0].live; /* checked below to hold our patch or the original */
	if (sie_quiesce(t, p, s, o, err))
		return -1;
	for (int i = 0; i < p->nspans; i++) {
		struct sie_span *sp = &p->spans[i];

		patch_bytes(sp, patch);
		if (target_read(t, sp->live, live, (size_t)sp->len) ||
		    (memcmp(live, patch, (size_t)sp->len) &&
		     memcmp(live, sp->expected, (size_t)sp->len))) {
			snprintf(err, SIE_ERR_LEN,
				 "span of %s at %#lx holds neither our patch nor the original "
				 "bytes: "
				 "left as is",
				 sp->name, sp->live);
			return -1;
		}
	}
	for (int i = 0; i < p->nspans; i++)
		target_write(t, p->spans[i].live, p->spans[i].expected, (size_t)p->spans[i].len);
	if (check_bytes(t, p, s->bias, 1, err))
		return -1;
	unmap_remote(t, s);
	return 0;
}

int sie_disarm(struct sie_plan *p, const struct sie_opts *o, struct sie_state *s,
	       char err[SIE_ERR_LEN])
{
	static struct target t;
	int rc;

	/* A main thread that has exited since arming: the live threads run on patched code. */
	if (target_attach(&t, s->pid, 1, err))
		return -1;
	/* Checked once attached: from then on the pid cannot be reused under us. */
	if (t.start_time != s->start_time) {
		snprintf(
			err, SIE_ERR_LEN,
			"refused: pid %d is another process now (started at %llu, the armed one at "
			"%llu); the armed process is gone with its patches, nothing to disarm",
			s->pid, t.start_time, s->start_time);
		target_detach(&t);
		return -1;
	}
	rc = sie_disarm_stopped(&t, p, o, s, err);
	target_detach(&t);
	return rc;
}
