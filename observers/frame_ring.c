// SPDX-License-Identifier: MIT
/* Producer side of the shared-memory frame ring (layout in xtune/signal.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "observer.h"

#define CATALOG_CAPACITY (256 * 1024)

static struct xt_ring_header *ring;
static size_t ring_bytes;
static char ring_name[256];

static struct xt_ring_slot *slot_of(uint64_t seq)
{
	return (struct xt_ring_slot *)((char *)ring + XT_RING_HEADER_SIZE +
				       (seq & (ring->slot_count - 1)) * ring->slot_size);
}

/* Refuse to take over a ring whose producer is still alive. */
static int ring_in_use(const char *name)
{
	struct xt_ring_header h;
	char path[300];
	int fd, n;

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, &h, sizeof(h));
	close(fd);
	if (n == sizeof(h) && h.magic == XT_RING_MAGIC && h.producer_pid &&
	    h.producer_pid != (uint32_t)getpid() && !kill(h.producer_pid, 0))
		return h.producer_pid;
	return 0;
}

int xt_ring_open(const char *name, uint32_t slot_count, uint64_t window_ns)
{
	size_t slot_size = sizeof(struct xt_ring_slot) + XT_FRAME_SIZE(xt_signal_count());
	int fd, pid;

	slot_size = (slot_size + 63) & ~(size_t)63;
	pid = ring_in_use(name);
	if (pid) {
		fprintf(stderr, "xobserve: shared-memory ring %s is in use by pid %d\n", name, pid);
		return -1;
	}
	ring_bytes = XT_RING_HEADER_SIZE + (size_t)slot_count * slot_size + CATALOG_CAPACITY;
	fd = shm_open(name, O_CREAT | O_RDWR | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, ring_bytes)) {
		fprintf(stderr, "xobserve: cannot create /dev/shm/%s: %s\n", name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	ring = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (ring == MAP_FAILED) {
		ring = NULL;
		shm_unlink(name);
		fprintf(stderr, "xobserve: cannot map /dev/shm/%s: %s\n", name, strerror(errno));
		return -1;
	}
	snprintf(ring_name, sizeof(ring_name), "%s", name);
	*ring = (struct xt_ring_header){
		.version = XT_RING_VERSION,
		.header_size = XT_RING_HEADER_SIZE,
		.slot_count = slot_count,
		.slot_size = slot_size,
		.catalog_offset = XT_RING_HEADER_SIZE + (size_t)slot_count * slot_size,
		.catalog_capacity = CATALOG_CAPACITY,
		.producer_pid = getpid(),
		.window_ns = window_ns,
	};
	/* Readers trust the ring once the magic is there. */
	__atomic_store_n(&ring->magic, XT_RING_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

void xt_ring_publish(const void *frame, size_t len)
{
	const struct xt_frame_header *h = frame;
	struct xt_ring_slot *slot;

	if (!ring)
		return;
	slot = slot_of(h->seq);
	__atomic_store_n(&slot->lock, 2 * h->seq - 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(slot + 1, frame, len);
	slot->size = len;
	__atomic_store_n(&slot->lock, 2 * h->seq, __ATOMIC_RELEASE);
	__atomic_store_n(&ring->head, h->seq, __ATOMIC_RELEASE);
	/* Readers blocked in FUTEX_WAIT on head's low word wake now, not at their next poll: one
	 * system call a frame, a few hundred ns when nobody waits. */
	syscall(SYS_futex, (uint32_t *)&ring->head, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void xt_ring_set_catalog(const char *json, size_t len)
{
	if (!ring)
		return;
	if (len > ring->catalog_capacity)
		len = ring->catalog_capacity;
	__atomic_store_n(&ring->catalog_lock, ring->catalog_lock + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy((char *)ring + ring->catalog_offset, json, len);
	ring->catalog_size = len;
	__atomic_store_n(&ring->catalog_lock, ring->catalog_lock + 1, __ATOMIC_RELEASE);
}

void xt_ring_set_dropped(uint64_t dropped)
{
	if (ring)
		__atomic_store_n(&ring->dropped, dropped, __ATOMIC_RELAXED);
}

void xt_ring_close(void)
{
	if (!ring)
		return;
	munmap(ring, ring_bytes);
	shm_unlink(ring_name);
	ring = NULL;
}
