/* SPDX-License-Identifier: MIT */
/*
 * The user-space SIE engine: patches the critical spans of a running, unmodified process so that
 * each runs a trampoline reading its perf-const from a knob slot (Scoped Indirect Execution).
 *
 * A plan (text, written by `xtune sie` from the scope table) lists the spans; arming stops every
 * thread, checks the live bytes, maps a trampoline page near the text and the knob table into the
 * target, and patches the jumps only when no thread is inside a safe span. The state (addresses of
 * the mappings, what was patched) is written so that disarm can restore the bytes exactly.
 */
#ifndef XTUNE_SIE_H
#define XTUNE_SIE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SIE_ERR_LEN    512
#define SIE_MAX_SPANS  64
#define SIE_MAX_BYTES  256
#define SIE_MAX_RELOCS 8
#define SIE_MAX_SAFE   32
#define SIE_PATH_LEN   256
#define SIE_MAX_CONSTS 16

enum sie_patch { SIE_PATCH_JUMP, SIE_PATCH_INT3 };
enum sie_reloc { SIE_RELOC_KNOB, SIE_RELOC_REL32 };

struct sie_reloc_ent {
	enum sie_reloc kind;
	uint32_t offset;
	uint64_t target; /* ELF vaddr (rel32) */
};

/* A perf-const of the plan: its original value and the values the analysis holds for. */
struct sie_const {
	char name[64];
	int64_t original;
	int64_t min, max; /* INT64_MIN / INT64_MAX when not validated */
	int64_t multiple_of;
	int power_of_two;
};

struct sie_span {
	char name[64]; /* perf-const */
	int slot;      /* knob slot */
	int cidx;      /* its `const` line, -1 if none */
	uint64_t vaddr;
	enum sie_patch patch;
	uint8_t expected[SIE_MAX_BYTES];
	int len;
	uint8_t tramp[SIE_MAX_BYTES];
	int tramp_len;
	struct sie_reloc_ent relocs[SIE_MAX_RELOCS];
	int nrelocs;
	uint64_t safe[SIE_MAX_SAFE][2]; /* ELF vaddr ranges [start, end) */
	int nsafe;
	/* Filled at arm time. */
	uint64_t live;	     /* bias + vaddr */
	uint64_t tramp_live; /* where its trampoline starts in the target */
};

struct sie_plan {
	char knobs[SIE_PATH_LEN]; /* knob table file, e.g. /dev/shm/xtune.knobs */
	uint64_t knobs_size;
	uint64_t load_vaddr;
	char build_id[129]; /* hex NT_GNU_BUILD_ID of the binary, "" when not given */
	char sha256[65];    /* hex SHA-256 of its whole file, "" when not given */
	/*
	 * A shared library's name (soname or file name), "" for the main executable. Its spans are
	 * relative to the load address of the one mapped file with `build_id` (required then).
	 */
	char library[SIE_PATH_LEN];
	struct sie_const consts[SIE_MAX_CONSTS];
	int nconsts;
	struct sie_span spans[SIE_MAX_SPANS];
	int nspans;
	/*
	 * Engine-owned values (`run`): trampolines read a word per perf-const in a page the engine
	 * maps, written only when no thread is inside the perf-const's spans; else xrtd's
	 * `applied`.
	 */
	int own_values;
	/*
	 * Return addresses inside the safe spans (after a call there): a uretprobe that hides one
	 * may hide a thread inside a safe span. -1 when the plan does not say (treated as some).
	 */
	int returns_in_safe;
};

struct sie_state {
	pid_t pid;
	uint64_t bias;
	uint64_t tramp_addr, tramp_size;
	uint64_t knob_addr, knob_size;
	pid_t server;	      /* int3 fallback: the process serving the breakpoints, 0 if none */
	uint64_t values_addr; /* engine-owned value words (`run` only; inside the trampoline map) */
	unsigned long long start_time; /* of the armed process: a reused pid is refused at disarm */
	int64_t *values; /* the engine's read-write view of the value words (`run` only) */
	int values_fd;	 /* the memfd behind them, for `--share-values`; -1 if none */
};

struct target;

struct sie_opts {
	int timeout_ms; /* give up waiting for threads to leave safe spans after this long */
	int verbose;
	/* Between two attempts to find the threads outside safe spans (default: sleep ~0.5 ms). */
	void (*pause)(struct target *t, const struct sie_plan *p);
};

int sie_plan_read(const char *path, struct sie_plan *p, char err[SIE_ERR_LEN]);
int sie_state_read(const char *path, struct sie_state *s, char err[SIE_ERR_LEN]);
int sie_state_write(const char *path, const struct sie_state *s, char err[SIE_ERR_LEN]);

/* Arm every span of the plan in one transaction; on failure nothing stays patched or stopped. */
int sie_arm(pid_t pid, struct sie_plan *p, const struct sie_opts *o, struct sie_state *s,
	    char err[SIE_ERR_LEN]);
/* Restore the original bytes of every span and unmap what arm mapped. */
int sie_disarm(struct sie_plan *p, const struct sie_opts *o, struct sie_state *s,
	       char err[SIE_ERR_LEN]);

/*
 * The int3 fallback: arm (spans marked int3 get a breakpoint), stay attached and send every hit
 * to its trampoline, until *stop; then disarm. `ready` is called once armed.
 */
int sie_serve(pid_t pid, struct sie_plan *p, const struct sie_opts *o, struct sie_state *s,
	      volatile int *stop, void (*ready)(const struct sie_state *s), char err[SIE_ERR_LEN]);

/*
 * `run`: like serve, with engine-owned values and a control channel: lines "set NAME VALUE" and
 * "disarm", one reply line each ("ok ..." or "err REASON"), either on a stream (in/out; its end
 * disarms) or one command per connection on a listening unix socket (listen_fd >= 0; SIGTERM
 * disarms). A value is written only when no thread is inside its perf-const's spans (generation
 * flip after quiescence).
 */
struct sie_ctl {
	int in, out;
	int listen_fd;
	/* Once armed, hand the value page to the controller on `out` (a unix stream): a line
	 * "values" carrying the memfd. The controller then stores the word of a perf-const read
	 * once per pass itself (the engine's own `set` does no more for it, see transition.c), with
	 * no round trip through the engine; every other change still comes here. */
	int share_values;
};

int sie_run(pid_t pid, struct sie_plan *p, const struct sie_opts *o, struct sie_state *s,
	    const struct sie_ctl *ctl, void (*ready)(const struct sie_state *s),
	    char err[SIE_ERR_LEN]);

/* True when a pass reads the perf-const once: one span whose trampoline loads its word once. A
 * change of such a perf-const is one atomic store of its word, with no transition. */
int sie_single_read(const struct sie_plan *p, const struct sie_const *c);
/* Refuse `value` for perf-const `c` when outside the plan's range or constraints. */
int sie_value_check(const struct sie_const *c, int64_t value, char err[SIE_ERR_LEN]);
/*
 * Refuse when the running binary is not the plan's: its build id differs from the plan's, or, for
 * a plan without one, the SHA-256 of the file it mapped does; for a library plan, when the library
 * with the plan's build id is no longer loaded at `bias`.
 */
int sie_check_identity(pid_t pid, const struct sie_plan *p, uint64_t bias, char err[SIE_ERR_LEN]);
/*
 * The load bias of the plan's library: the start of the offset-0 mapping of the one mapped file
 * whose build id is the plan's. Refused (with the reason) when none is loaded, when a file of
 * that name has another build id, or when two are.
 */
int sie_find_library(pid_t pid, const struct sie_plan *p, uint64_t *bias, char err[SIE_ERR_LEN]);

/* The hex SHA-256 of the whole file open at `fd` (read from offset 0); -1 on a read error. */
int sie_sha256_fd(int fd, char out[65]);

/* One line of /proc/PID/maps; `name` is "" for an anonymous mapping. */
struct sie_mapping {
	uint64_t start, end, offset;
	char perms[8];
	char name[SIE_PATH_LEN];
};

/* Read /proc/PID/maps: open (NULL when the process is gone), then one mapping per call (0 at the
 * end); fclose when done. */
FILE *sie_maps_open(pid_t pid);
int sie_maps_next(FILE *f, struct sie_mapping *m);
/* The process's start time (/proc/PID/stat), 0 when it is gone: a reused pid has another. */
unsigned long long sie_start_time(pid_t pid);

#endif /* XTUNE_SIE_H */
