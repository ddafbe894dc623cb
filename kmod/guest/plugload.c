// SPDX-License-Identifier: GPL-2.0
/*
 * plugload: block I/O that goes through a plug. Each round submits N direct 4 KiB reads with one
 * io_submit() (the kernel plugs when more than two are submitted) at offsets 8 KiB apart, so no
 * two requests merge and every one is added to the plug by blk_add_rq_to_plug().
 *
 *   plugload DEVICE N ROUNDS      prints rounds=, requests=, ns=
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BLOCK	4096
#define MAX_REQ 1024

int main(int argc, char **argv)
{
	static struct iocb cbs[MAX_REQ];
	static struct iocb *list[MAX_REQ];
	static struct io_event events[MAX_REQ];
	aio_context_t ctx = 0;
	struct timespec t0, t1;
	cpu_set_t cpu;
	char *buf;
	int fd, n, rounds;

	if (argc != 4 || (n = atoi(argv[2])) < 3 || n > MAX_REQ || (rounds = atoi(argv[3])) < 1) {
		fprintf(stderr, "usage: plugload DEVICE N(3..%d) ROUNDS\n", MAX_REQ);
		return 2;
	}
	/* One CPU: all requests go to one hardware queue, as in the plain plug case. */
	CPU_ZERO(&cpu);
	CPU_SET(0, &cpu);
	sched_setaffinity(0, sizeof(cpu), &cpu);
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign((void **)&buf, BLOCK, (size_t)n * BLOCK) ||
	    syscall(SYS_io_setup, n, &ctx)) {
		perror("plugload: setup");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		memset(&cbs[i], 0, sizeof(cbs[i]));
		cbs[i].aio_fildes = fd;
		cbs[i].aio_lio_opcode = IOCB_CMD_PREAD;
		cbs[i].aio_buf = (uintptr_t)(buf + (size_t)i * BLOCK);
		cbs[i].aio_nbytes = BLOCK;
		cbs[i].aio_offset = (int64_t)i * 2 * BLOCK;
		list[i] = &cbs[i];
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int r = 0; r < rounds; r++) {
		int done = 0;

		if (syscall(SYS_io_submit, ctx, n, list) != n) {
			perror("plugload: io_submit");
			return 1;
		}
		while (done < n) {
			long got = syscall(SYS_io_getevents, ctx, 1, n - done, events, NULL);

			if (got < 0) {
				perror("plugload: io_getevents");
				return 1;
			}
			done += got;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("rounds=%d requests=%d ns=%lld\n", rounds, rounds * n,
	       (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
	return 0;
}
