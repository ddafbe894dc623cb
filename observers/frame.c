// SPDX-License-Identifier: MIT
/* Building one frame per window: items, quantiles, per-CPU deltas. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "observer.h"

static union {
	struct xt_frame_header hdr;
	unsigned char bytes[XT_FRAME_SIZE(XT_FRAME_MAX_ITEMS)];
} frame;

static struct xt_signal_item *items = (struct xt_signal_item *)(frame.bytes + sizeof(frame.hdr));

uint64_t xt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void xt_frame_begin(uint64_t seq, uint64_t start_ns, uint64_t end_ns, uint64_t dropped)
{
	frame.hdr = (struct xt_frame_header){
		.magic = XT_FRAME_MAGIC,
		.version = XT_FRAME_VERSION,
		.header_size = sizeof(struct xt_frame_header),
		.seq = seq,
		.window_start_ns = start_ns,
		.window_end_ns = end_ns,
		.dropped = dropped,
	};
}

static void emit(int id, uint32_t flags, double value)
{
	if (id <= 0 || frame.hdr.count >= XT_FRAME_MAX_ITEMS)
		return;
	items[frame.hdr.count++] =
		(struct xt_signal_item){.id = id, .flags = flags, .value = value};
}

void xt_emit(int id, double value)
{
	emit(id, 0, value);
}

void xt_emit_empty(int id)
{
	emit(id, XT_ITEM_EMPTY, 0);
}

const void *xt_frame_bytes(size_t *len)
{
	*len = XT_FRAME_SIZE(frame.hdr.count);
	return frame.bytes;
}

int xt_quantiles_add(const char *base, const char *unit, const char *source)
{
	char name[96];
	int p50;

	snprintf(name, sizeof(name), "%s.p50", base);
	p50 = xt_signal_add(name, unit, "quantile", source);
	snprintf(name, sizeof(name), "%s.p99", base);
	xt_signal_add(name, unit, "quantile", source);
	return p50;
}

void xt_emit_quantiles(int p50_id, const __u64 *slots, int nslots, double scale)
{
	uint64_t total = 0;
	int b;

	for (b = 0; b < nslots; b++)
		total += slots[b];
	if (!total) {
		xt_emit_empty(p50_id);
		xt_emit_empty(p50_id + 1);
		return;
	}
	xt_emit(p50_id, xt_hist_quantile(slots, nslots, 0.50) * scale);
	xt_emit(p50_id + 1, xt_hist_quantile(slots, nslots, 0.99) * scale);
}

int xt_nr_cpus(void)
{
	static int n;
	long conf;

	if (!n) { /* BPF programs index by CPU & (XT_MAX_CPUS - 1) */
		conf = sysconf(_SC_NPROCESSORS_CONF);
		n = conf < XT_MAX_CPUS ? conf : XT_MAX_CPUS;
	}
	return n;
}

void xt_striped_delta(const void *stripes, int n, void *prev, void *delta, size_t size)
{
	const volatile unsigned char *base = stripes;
	uint64_t *p = prev, *d = delta;
	size_t i, nwords = size / sizeof(uint64_t);
	int s;

	memset(delta, 0, size);
	for (s = 0; s < n; s++) {
		const volatile uint64_t *w = (const volatile uint64_t *)(base + s * size);

		for (i = 0; i < nwords; i++)
			d[i] += w[i];
	}
	for (i = 0; i < nwords; i++) {
		uint64_t now = d[i];

		d[i] = now - p[i];
		p[i] = now;
	}
}

void xt_percpu_delta(const void *percpu, void *prev, void *delta, size_t size)
{
	xt_striped_delta(percpu, xt_nr_cpus(), prev, delta, size);
}
