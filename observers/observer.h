/* SPDX-License-Identifier: MIT */
/*
 * xobserve internals: the family interface, the signal catalog, the window being built, and
 * the three outputs (shared-memory ring, ZeroMQ, recording file).
 */
#ifndef XOBSERVE_OBSERVER_H
#define XOBSERVE_OBSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

#include "xtune/signal.h"
#include "xtune/observe_bpf.h"
#include "xtune/recording.h"
#include "xtune/zmq_curve.h"

#define XT_MAX_FUNCS	 8
#define XT_MAX_FUNC_ARGS 4 /* argument gauges per --func */

/* Command-line settings a family may need. */
struct xt_options {
	int block_major, block_minor; /* block: only this device; -1 = every device */
	int target_pid;		      /* syscall, sched, func: 0 = every process */
	const char *target_comm;      /* syscall, sched, func: NULL = every command */
	uint64_t target_cgroup;	      /* sched target: this cgroup v2's id; 0 = none */
	uint32_t netns_ino;	      /* tcp: sockets of this network namespace only; 0 = all */
	int port;		      /* tcp: connections with this local or remote port; 0 = all */
	const char *funcs[XT_MAX_FUNCS]; /* func: "BINARY:FUNCTION[:argN[/32]=NAME]..." */
	int nr_funcs;
};

/*
 * One signal family. start() loads and attaches its programs and registers its signals;
 * collect() emits the window's items; stop() detaches and frees everything (safe to call after a
 * failed or partial start). A family that cannot run here says why in start()'s error.
 */
struct xt_family {
	const char *name;
	const char *summary;
	int (*start)(const struct xt_options *opt);
	void (*collect)(uint64_t window_ns);
	void (*stop)(void);
};

/* A --func BINARY:FUNCTION[:argN[/32]=NAME]... */
struct xt_func_spec {
	char binary[4096];
	char function[128];
	int nargs;
	struct {
		int reg; /* 0..4 */
		bool bits32;
		char name[48];
	} args[XT_MAX_FUNC_ARGS];
};

/* 0, or -1 with the reason in err. */
int xt_func_spec_parse(const char *arg, struct xt_func_spec *spec, char *err, size_t errlen);

/* Catalog: ids are assigned in registration order starting at 1. */
int xt_signal_add(const char *name, const char *unit, const char *kind, const char *source);
const char *xt_signal_name(uint32_t id);
int xt_signal_count(void);
void xt_catalog_set_pmu(bool available);
bool xt_catalog_pmu(void);
/* The catalog as JSON (static buffer, valid until the next call); its version bumps on change. */
const char *xt_catalog_json(uint64_t window_ns, size_t *len);
uint64_t xt_catalog_generation(void);

/* The frame being built for the current window. */
void xt_emit(int id, double value);
void xt_emit_empty(int id);
/* p50 and p99 of a histogram delta (ids p50_id and p50_id + 1, registered by xt_quantiles_add). */
int xt_quantiles_add(const char *base, const char *unit, const char *source);
void xt_emit_quantiles(int p50_id, const __u64 *slots, int nslots, double scale);
double xt_hist_quantile(const __u64 *slots, int nslots, double q);
/* Bucket idx of a histogram holds the integers [lo, lo + width). */
void xt_hist_bucket(int idx, uint64_t *lo, uint64_t *width);

/*
 * Sum a family's cumulative per-CPU stats (structs of u64, `size` bytes each, one per CPU) and
 * turn the sum into the delta since the previous call, kept in `prev`.
 */
void xt_percpu_delta(const void *percpu, void *prev, void *delta, size_t size);
/* The same over n stripes (families whose CPUs share stripes: CPU & (n - 1)). */
void xt_striped_delta(const void *stripes, int n, void *prev, void *delta, size_t size);
int xt_nr_cpus(void);

void xt_frame_begin(uint64_t seq, uint64_t start_ns, uint64_t end_ns, uint64_t dropped);
const void *xt_frame_bytes(size_t *len);

/* Shared-memory ring (/dev/shm/<name>). */
int xt_ring_open(const char *name, uint32_t slot_count, uint64_t window_ns);
void xt_ring_publish(const void *frame, size_t len);
void xt_ring_set_catalog(const char *json, size_t len);
void xt_ring_set_dropped(uint64_t dropped);
void xt_ring_close(void);

/*
 * ZeroMQ XPUB: like PUB, but a new subscriber's subscription triggers a catalog at once.
 * curve_dir: CURVE keys (xtune/zmq_curve.h), or NULL for a socket in clear.
 */
int xt_zmq_open(const char *endpoint, int hwm, const char *curve_dir); /* hwm: per subscriber */
int xt_zmq_publish(const char *topic, const void *data, size_t len);   /* -1: not sent (dropped) */
bool xt_zmq_new_subscriber(void);
void xt_zmq_close(void);

/* Recording file (format in observers/README.md). */
int xt_rec_open(const char *path);
int xt_rec_write(uint16_t type, const void *data, size_t len);
void xt_rec_close(void);

/* libbpf messages of the family being started, for a failure's verifier-log tail. */
void xt_libbpf_log_reset(void);
void xt_libbpf_log_tail(int lines);

uint64_t xt_now_ns(void);

#endif /* XOBSERVE_OBSERVER_H */
