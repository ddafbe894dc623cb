/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * xsie: Scoped Indirect Execution for kernel perf-consts — the user interface of /dev/xsie.
 *
 * A perf-const ("const") has an id (0 .. XSIE_MAX_CONSTS-1) that names its slot in the value
 * page, one or more critical spans (where its value enters a register) and safe spans (functions
 * whose execution may still depend on the old value). User space:
 *   1. names the kernel build the spans are for (XSIE_IOC_KERNEL), then
 *      loads spans and safe spans (XSIE_IOC_LOAD_SPAN / XSIE_IOC_LOAD_SAFE), each checked against
 *      kallsyms function bounds and the live instruction bytes;
 *   2. loads the valid range of V (XSIE_IOC_LOAD_RANGE) and writes V with XSIE_IOC_SET, or into
 *      the mmap()ed value page (no system call, takes effect at next hit; a value out of range
 *      is not applied). A const with several spans takes a later value only through
 *      XSIE_IOC_SET: a flip that waits until no thread is inside its safe spans (the status
 *      shows XSIE_TRANSITION meanwhile), so an execution never mixes two values; its handlers
 *      ignore later stores to the page. A const with one span reads the page once per
 *      execution, so a store is safe by itself;
 *   3. arms one const, or several in a transaction (BEGIN, ARM..., COMMIT) that switch together,
 *      with a transition mode;
 *   4. disarms (all consts of the transaction together) and finally unloads.
 */
#ifndef _UAPI_XSIE_H
#define _UAPI_XSIE_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define XSIE_DEVICE	"/dev/xsie"
#define XSIE_MAX_CONSTS 64
#define XSIE_MAX_SPANS	16 /* critical spans per const */
#define XSIE_MAX_EXITS	16 /* exit instructions per safe span */
#define XSIE_SYM_LEN	128
#define XSIE_MAX_BYTES	32
#define XSIE_TXN_MAX	8 /* consts per transaction */

/* The value page (mmap offset 0, one page): value[id] is V for const id, read at every hit. */
struct xsie_value_page {
	__s64 value[XSIE_MAX_CONSTS];
};

/* How the synthesized update rewrites the register at the probe (IV = a * V + b). */
enum xsie_update {
	XSIE_UPD_SET = 1,   /* reg = a*V + b: the span loads the constant into reg */
	XSIE_UPD_SCALE = 2, /* reg = (reg + pre_add) * (a*V + b) / (a*V0 + b) - pre_add: the
			     * span leaves k * IV(V0) in reg; a probe on its last instruction
			     * `add $pre_add` runs before it (and can be jump-optimized) */
	XSIE_UPD_CMP = 3,   /* the span is one `cmp $IV(V0), reg`: it is emulated with IV(V)
			     * (EFLAGS computed, execution resumes after it) */
	XSIE_UPD_SHIFT = 4, /* the span is one `shl|shr|sar $IV(V0), reg` (the bytes say which):
			     * reg is shifted by IV(V) in [0, width - 1] and execution resumes
			     * after it; the flags stay as they were (the analysis takes the
			     * span only where no one reads them) */
};

/* pt_regs general-purpose registers, in the order of struct pt_regs' names. */
enum xsie_reg {
	XSIE_REG_AX,
	XSIE_REG_BX,
	XSIE_REG_CX,
	XSIE_REG_DX,
	XSIE_REG_SI,
	XSIE_REG_DI,
	XSIE_REG_BP,
	XSIE_REG_R8,
	XSIE_REG_R9,
	XSIE_REG_R10,
	XSIE_REG_R11,
	XSIE_REG_R12,
	XSIE_REG_R13,
	XSIE_REG_R14,
	XSIE_REG_R15,
	XSIE_REG_COUNT,
};

struct xsie_span_desc {
	__u32 const_id;
	__u32 update; /* enum xsie_update */
	char func[XSIE_SYM_LEN];
	__u32 check_offset; /* first byte of the span, relative to func */
	__u32 nbytes;	    /* expected bytes from check_offset (span + probed instruction) */
	__u8 bytes[XSIE_MAX_BYTES];
	__u32 probe_offset; /* the instruction that consumes the state: the update runs before it */
	__u32 reg;	    /* enum xsie_reg */
	__u32 width;	    /* 16, 32 or 64 (8 too for a shift): bits written back */
	__u32 pad;
	__s64 a, b;    /* IV = a * V + b */
	__s64 v0;      /* the value compiled into the kernel */
	__s64 pre_add; /* XSIE_UPD_SCALE: immediate the probed instruction still adds */
};

/* A safe span: a function, entered at +0 and left at the given exit instructions. */
struct xsie_safe_desc {
	__u32 const_id;
	__u32 nexits;
	char func[XSIE_SYM_LEN];
	__u32 exits[XSIE_MAX_EXITS]; /* offsets of ret / return-thunk jumps / tail calls */
};

/*
 * The values a const may take (from the analysis): V in [min, max], a multiple of multiple_of
 * (0 or 1: any), a power of two with XSIE_RANGE_POWER_OF_TWO in flags (the code holds only for
 * those). Until a range is loaded only the compiled value is accepted. XSIE_IOC_SET refuses other
 * values; a value stored into the value page that is not valid is never applied (the handlers
 * keep the last valid value).
 */
#define XSIE_RANGE_POWER_OF_TWO 1u

struct xsie_range {
	__u32 const_id;
	__u32 flags; /* XSIE_RANGE_* */
	__s64 min, max;
	__s64 multiple_of;
};

struct xsie_value {
	__u32 const_id;
	__u32 pad;
	__s64 value;
};

/* The GNU build id of the kernel the spans were analyzed for: loads through a file are refused
 * until it matched the running kernel's (its vmlinux note, as in /sys/kernel/notes). */
#define XSIE_BUILD_ID_LEN 20
struct xsie_kernel {
	__u8 build_id[XSIE_BUILD_ID_LEN];
};

enum xsie_mode {
	XSIE_MODE_IMMEDIATE = 0,  /* switch now */
	XSIE_MODE_PER_THREAD = 1, /* each thread switches when it next enters a safe span */
	XSIE_MODE_GLOBAL = 2,	  /* switch when no thread is inside any safe span */
};

struct xsie_arm {
	__u32 const_id;
	__u32 mode; /* enum xsie_mode; inside a transaction the COMMIT's mode counts */
};

enum xsie_state {
	XSIE_UNUSED = 0,
	XSIE_LOADED = 1,     /* spans checked, no probe */
	XSIE_TRANSITION = 2, /* probes placed, waiting for the safe point */
	XSIE_ARMED = 3,	     /* new value in effect */
};

struct xsie_status {
	__u32 const_id; /* in */
	__u32 state;	/* enum xsie_state */
	__u32 mode;
	__u32 nspans;
	__u32 optimized; /* spans whose kprobe is jump-optimized now */
	__u32 int3;	 /* spans that run through int3 */
	__u32 group;	 /* transaction id (0: none) */
	__u32 pad;
	__s64 inside;	      /* global mode: threads counted inside safe spans */
	__u64 hits;	      /* critical span executions since load */
	__u64 applied;	      /* of which ran the update (new value) */
	__u64 old_value_hits; /* per-thread mode: executions that kept the old value */
	__u64 transition_ns;  /* arm request to safe switch, 0 while pending */
	__u64 refcount_updates;
};

#define XSIE_IOC_MAGIC	    'x'
#define XSIE_IOC_LOAD_SPAN  _IOW(XSIE_IOC_MAGIC, 1, struct xsie_span_desc)
#define XSIE_IOC_LOAD_SAFE  _IOW(XSIE_IOC_MAGIC, 2, struct xsie_safe_desc)
#define XSIE_IOC_ARM	    _IOW(XSIE_IOC_MAGIC, 3, struct xsie_arm)
#define XSIE_IOC_DISARM	    _IOW(XSIE_IOC_MAGIC, 4, __u32)
#define XSIE_IOC_UNLOAD	    _IOW(XSIE_IOC_MAGIC, 5, __u32)
#define XSIE_IOC_STATUS	    _IOWR(XSIE_IOC_MAGIC, 6, struct xsie_status)
#define XSIE_IOC_TXN_BEGIN  _IO(XSIE_IOC_MAGIC, 7)
#define XSIE_IOC_TXN_COMMIT _IOW(XSIE_IOC_MAGIC, 8, __u32) /* arg: enum xsie_mode */
#define XSIE_IOC_TXN_ABORT  _IO(XSIE_IOC_MAGIC, 9)
#define XSIE_IOC_LOAD_RANGE _IOW(XSIE_IOC_MAGIC, 10, struct xsie_range)
#define XSIE_IOC_SET	    _IOW(XSIE_IOC_MAGIC, 11, struct xsie_value)
#define XSIE_IOC_KERNEL	    _IOW(XSIE_IOC_MAGIC, 12, struct xsie_kernel)

#endif /* _UAPI_XSIE_H */
