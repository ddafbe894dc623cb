/* SPDX-License-Identifier: MIT */
/*
 * The knob table: shared memory (/dev/shm/<name>, default "xtune.knobs") owned by xrtd.
 * tuner/xtune/knobs.py maps the same bytes; SIE engines read `applied` at the probe site.
 *
 * Ownership of fields, so that no slot ever has two writers of one word:
 *   - xrtd writes everything at registration, then only the "xrtd" part of a slot;
 *   - the tuner writes only `desired` and then bumps `desired_gen` (release order);
 *   - xrtd notices desired_gen changing, checks bounds/enum/step, journals, applies, reads back,
 *     then publishes applied/state/error under `seq` (a seqlock: odd while writing).
 * Values are 64-bit integers: sysctl, sysfs, BPF constants and perf-consts are all integers;
 * enum knobs hold the index into their value list; multi-value sysctls are one knob per field
 * (target "net.ipv4.tcp_rmem[1]").
 * `applied` is what the system runs with, and only ever holds values xrtd accepted: SIE engines
 * read it with a single aligned 8-byte load.
 */
#ifndef XTUNE_KNOB_H
#define XTUNE_KNOB_H

#include <stdint.h>

#define XT_KNOB_TABLE_MAGIC   0x544b5458u /* "XTKT" */
#define XT_KNOB_TABLE_VERSION 1
#define XT_KNOB_MAX	      256
#define XT_KNOB_NAME_LEN      64
#define XT_KNOB_TARGET_LEN    192
#define XT_KNOB_HEADER_SIZE   4096

enum xt_backend {
	XT_BACKEND_NONE = 0,
	XT_BACKEND_SYSCTL = 1,
	XT_BACKEND_SYSFS = 2,
	XT_BACKEND_BPF = 3,
	XT_BACKEND_SIE_USER = 4,
	XT_BACKEND_SIE_KERNEL = 5,
};

enum xt_knob_type {
	XT_KNOB_INT = 0,
	XT_KNOB_ENUM = 1, /* value = index into the enum list kept by xrtd */
};

enum xt_knob_state {
	XT_KNOB_FREE = 0,	 /* slot unused */
	XT_KNOB_REGISTERED = 1,	 /* registered, still at its original value */
	XT_KNOB_APPLYING = 2,	 /* journaled, being written */
	XT_KNOB_APPLIED = 3,	 /* applied == desired, verified by reading back */
	XT_KNOB_REFUSED = 4,	 /* desired was out of bounds / not allowed; applied unchanged */
	XT_KNOB_FAILED = 5,	 /* the backend failed; applied unchanged (restored) */
	XT_KNOB_ROLLED_BACK = 6, /* restored to a previous value by rollback or lease expiry */
};

struct xt_knob_slot {
	/* Written by xrtd at registration; constant while the slot is in use. */
	char name[XT_KNOB_NAME_LEN];
	char target[XT_KNOB_TARGET_LEN];
	uint32_t backend; /* enum xt_backend */
	uint32_t type;	  /* enum xt_knob_type */
	int64_t min;
	int64_t max;
	int64_t step;	  /* 0 or 1: any integer in [min, max] */
	int64_t original; /* the value found on the system at registration */
	uint64_t reg_gen; /* bumped on every (re)registration of this slot */
	uint8_t reserved0[80];

	/* Written by the tuner (offset 384: its own cache line). */
	int64_t desired;
	uint64_t desired_gen; /* bumped after writing desired */
	uint8_t reserved1[48];

	/* Written by xrtd (offset 448: its own cache line), under seq. */
	uint64_t seq;	      /* seqlock: odd while applied/state/error change */
	int64_t applied;      /* the value in effect */
	uint64_t applied_gen; /* the desired_gen that `applied`/`state` answer */
	uint32_t state;	      /* enum xt_knob_state */
	int32_t error;	      /* errno of the last failure, 0 if none */
	uint64_t applied_ns;  /* CLOCK_MONOTONIC when xrtd published this answer */
	uint8_t reserved2[24];
};

struct xt_knob_table_header {
	uint32_t magic;
	uint16_t version;
	uint16_t header_size; /* XT_KNOB_HEADER_SIZE */
	uint32_t slot_size;   /* sizeof(struct xt_knob_slot) = 512 */
	uint32_t slot_count;  /* XT_KNOB_MAX */
	uint32_t xrtd_pid;
	uint32_t reserved;
	uint64_t doorbell; /* the tuner may bump this (and FUTEX_WAKE) to cut xrtd's latency */
	uint64_t lease_deadline_ns; /* CLOCK_MONOTONIC: the first held lease to end; 0 = none */
};

/* The mapping: header page, then slot_count slots. */
#define XT_KNOB_SLOT_OFFSET(i) (XT_KNOB_HEADER_SIZE + (uint64_t)(i) * sizeof(struct xt_knob_slot))
#define XT_KNOB_TABLE_SIZE     (XT_KNOB_SLOT_OFFSET(XT_KNOB_MAX))

#ifdef __cplusplus
#define XT_STATIC_ASSERT static_assert
#else
#define XT_STATIC_ASSERT _Static_assert
#endif
XT_STATIC_ASSERT(sizeof(struct xt_knob_slot) == 512, "knob slot layout");
XT_STATIC_ASSERT(__builtin_offsetof(struct xt_knob_slot, desired) == 384, "desired offset");
XT_STATIC_ASSERT(__builtin_offsetof(struct xt_knob_slot, applied) == 456, "applied offset");

#endif /* XTUNE_KNOB_H */
