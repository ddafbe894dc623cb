/* SPDX-License-Identifier: MIT */
/*
 * Signal frames and the shared-memory frame ring: the one definition.
 * tuner/xtune/signals.py decodes the same bytes; keep the two in step.
 *
 * All fields are little-endian and laid out exactly as declared (no implicit padding).
 */
#ifndef XTUNE_SIGNAL_H
#define XTUNE_SIGNAL_H

#include <stdint.h>

#define XT_FRAME_MAGIC	   0x52465458u /* "XTFR" */
#define XT_FRAME_VERSION   1
#define XT_FRAME_MAX_ITEMS 1024

/* Frame flags. */
#define XT_FRAME_REPLAYED (1u << 0) /* republished from a recording */

/* Item flags. */
#define XT_ITEM_EMPTY (1u << 0) /* no sample in this window (quantile of nothing); value is 0 */

/*
 * One frame closes one window of the observer (default 10 ms, down to 1 ms).
 * Signal names follow "family.signal" (e.g. "block.ops"); quantiles are items of their own
 * named "<base>.p50" / "<base>.p99", which the tuner's expressions write p99(<base>).
 */
struct xt_frame_header {
	uint32_t magic;
	uint16_t version;
	uint16_t header_size;	  /* sizeof(struct xt_frame_header): readers skip future fields */
	uint64_t seq;		  /* 1, 2, 3, ... per producer run; a gap means frames were lost */
	uint64_t window_start_ns; /* CLOCK_MONOTONIC */
	uint64_t window_end_ns;	  /* CLOCK_MONOTONIC */
	uint32_t count;		  /* number of struct xt_signal_item that follow */
	uint32_t flags;		  /* XT_FRAME_* */
	uint64_t dropped;	  /* frames the producer failed to publish so far (cumulative) */
};

struct xt_signal_item {
	uint32_t id;	/* catalog id */
	uint32_t flags; /* XT_ITEM_* */
	double value;
};

#define XT_FRAME_SIZE(count)                                                                       \
	(sizeof(struct xt_frame_header) + (uint64_t)(count) * sizeof(struct xt_signal_item))

/*
 * Shared-memory ring, /dev/shm/<name> (default "xtune.signals"): one producer, any number of
 * readers. Layout: header (4096 bytes), slot_count slots of slot_size bytes, then the catalog.
 * Frame seq s lives in slot s % slot_count. A slot's seqlock is odd while written and equals
 * 2 * seq once the frame is complete; a reader that finds 2 * seq larger than it expected was
 * overrun and counts the difference as lost.
 */
#define XT_RING_MAGIC	    0x47525458u /* "XTRG" */
#define XT_RING_VERSION	    1
#define XT_RING_HEADER_SIZE 4096

struct xt_ring_header {
	uint32_t magic;
	uint16_t version;
	uint16_t header_size;	 /* XT_RING_HEADER_SIZE */
	uint32_t slot_count;	 /* a power of two */
	uint32_t slot_size;	 /* bytes per slot, struct xt_ring_slot included */
	uint64_t head;		 /* seq of the newest complete frame; written after its slot, then
				  * FUTEX_WAKE on its low 32 bits (little-endian: its address) */
	uint64_t catalog_lock;	 /* seqlock over the catalog bytes: odd while rewritten */
	uint32_t catalog_offset; /* from the start of the mapping */
	uint32_t catalog_size;	 /* bytes of JSON actually used */
	uint32_t catalog_capacity;
	uint32_t producer_pid;
	uint64_t window_ns;
	uint64_t dropped; /* same counter as in the frames */
};

struct xt_ring_slot {
	uint64_t lock; /* seqlock, see above */
	uint32_t size; /* bytes of the frame that follows */
	uint32_t reserved;
	/* frame bytes follow */
};

/*
 * ZeroMQ PUB (default tcp://127.0.0.1:5557), multipart messages:
 *   ["frame",   <frame bytes>]
 *   ["catalog", <catalog JSON>]  at start, whenever it changes, and once a second
 * Catalog JSON: {"version": 1, "window_ns": N, "pmu": "available" | "unavailable",
 *   "signals": [{"id": N, "name": "block.ops", "unit": "ops", "kind": "counter|gauge|quantile",
 *                "source": "tracepoint:block/block_rq_issue"}, ...]}
 */
#define XT_ZMQ_TOPIC_FRAME   "frame"
#define XT_ZMQ_TOPIC_CATALOG "catalog"

#endif /* XTUNE_SIGNAL_H */
