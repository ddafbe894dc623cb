// SPDX-License-Identifier: MIT
/* The shared knob table: xrtd creates it and is the only writer of everything but `desired`. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "registry.h"

static struct xt_knob_table_header *table;
static const char *table_shm_name;

int table_create(const char *name)
{
	struct xt_knob_table_header *h;
	int fd;

	fd = shm_open(name, O_RDONLY, 0);
	if (fd >= 0) {
		struct xt_knob_table_header old = {0};
		bool live = pread(fd, &old, sizeof(old), 0) == sizeof(old) &&
			    old.magic == XT_KNOB_TABLE_MAGIC && old.xrtd_pid &&
			    (pid_t)old.xrtd_pid != getpid() && !kill(old.xrtd_pid, 0);

		close(fd);
		if (live)
			return -EADDRINUSE;
	}
	/* A table left by a dead xrtd is replaced, never reused: its slots describe nothing. */
	shm_unlink(name);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, XT_KNOB_TABLE_SIZE)) {
		int ret = -errno;

		close(fd);
		shm_unlink(name);
		return ret;
	}
	h = mmap(NULL, XT_KNOB_TABLE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED) {
		shm_unlink(name);
		return -errno;
	}
	h->version = XT_KNOB_TABLE_VERSION;
	h->header_size = XT_KNOB_HEADER_SIZE;
	h->slot_size = sizeof(struct xt_knob_slot);
	h->slot_count = XT_KNOB_MAX;
	h->xrtd_pid = getpid();
	__atomic_store_n(&h->magic, XT_KNOB_TABLE_MAGIC, __ATOMIC_RELEASE);
	table = h;
	table_shm_name = name;
	return 0;
}

const char *table_name(void)
{
	return table_shm_name;
}

void table_destroy(void)
{
	if (!table)
		return;
	munmap(table, XT_KNOB_TABLE_SIZE);
	table = NULL;
	shm_unlink(table_shm_name);
}

void table_set_lease_deadline(uint64_t ns)
{
	__atomic_store_n(&table->lease_deadline_ns, ns, __ATOMIC_RELEASE);
}

uint32_t *table_doorbell(void)
{
	return (uint32_t *)&table->doorbell; /* low half (little endian) */
}

struct xt_knob_slot *table_slot(int i)
{
	return (struct xt_knob_slot *)((char *)table + XT_KNOB_SLOT_OFFSET(i));
}

void table_fill_slot(struct xrtd_knob *k)
{
	struct xt_knob_slot *s = k->shared;
	uint64_t gen = __atomic_load_n(&s->desired_gen, __ATOMIC_ACQUIRE);

	snprintf(s->name, sizeof(s->name), "%s", k->name);
	snprintf(s->target, sizeof(s->target), "%s", k->target);
	s->backend = k->backend->id;
	s->type = k->type;
	s->min = k->min;
	s->max = k->max;
	s->step = k->step;
	s->original = k->original;
	s->desired = k->original;
	s->reg_gen++;
	k->seen_gen = gen;
	table_publish(k, XT_KNOB_REGISTERED, 0, gen);
}

void table_publish(struct xrtd_knob *k, uint32_t state, int32_t error, uint64_t gen)
{
	struct xt_knob_slot *s = k->shared;

	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->applied, k->applied, __ATOMIC_RELAXED);
	__atomic_store_n(&s->state, state, __ATOMIC_RELAXED);
	__atomic_store_n(&s->error, error, __ATOMIC_RELAXED);
	__atomic_store_n(&s->applied_gen, gen, __ATOMIC_RELAXED);
	__atomic_store_n(&s->applied_ns, now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

void table_free_slot(int i)
{
	struct xt_knob_slot *s = table_slot(i);

	__atomic_store_n(&s->state, XT_KNOB_FREE, __ATOMIC_RELEASE);
	memset(s->name, 0, sizeof(s->name));
	memset(s->target, 0, sizeof(s->target));
	s->backend = XT_BACKEND_NONE;
}
