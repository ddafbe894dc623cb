/* SPDX-License-Identifier: MIT */
/*
 * Recording files: the one definition (tuner/xtune/recording.py reads and writes the same bytes).
 *
 * A file is a header followed by records. Every record is appended with a single write(), so
 * several writers (xobserve, the tuner) may append to one file and a reader may follow it while it
 * grows: a record is complete once all of its `size` payload bytes are there. Little-endian.
 */
#ifndef XTUNE_RECORDING_H
#define XTUNE_RECORDING_H

#include <stdint.h>

#define XT_REC_MAGIC   "XTRECORD"
#define XT_REC_VERSION 1

struct xt_rec_file_header {
	char magic[8];	      /* XT_REC_MAGIC, not NUL-terminated */
	uint16_t version;     /* XT_REC_VERSION */
	uint16_t header_size; /* sizeof(struct xt_rec_file_header): readers skip future fields */
	uint32_t reserved;
	uint64_t created_unix_ns; /* CLOCK_REALTIME when the file was created */
};

struct xt_rec_header {
	uint16_t type;	  /* XT_REC_* */
	uint16_t flags;	  /* 0 */
	uint32_t size;	  /* payload bytes that follow */
	uint64_t time_ns; /* CLOCK_MONOTONIC when the record was written */
};

/* Record types; readers skip types they do not know. */
#define XT_REC_CATALOG	   1 /* catalog JSON (as on ZeroMQ); applies to the frames that follow */
#define XT_REC_FRAME	   2 /* frame bytes (signal.h) */
#define XT_REC_KNOB_CHANGE 3 /* JSON: {"knob", "backend", "old", "new", "reason", ...} */
#define XT_REC_DECISION	   4 /* JSON: {"policy", "values", "reason", ...} */

#endif /* XTUNE_RECORDING_H */
