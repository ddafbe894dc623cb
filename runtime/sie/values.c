// SPDX-License-Identifier: MIT
/*
 * Engine-owned value words: a memfd page mapped read-only by the target (beside its trampolines)
 * and read-write by the engine. The engine changes a value with one aligned 8-byte atomic store,
 * which a trampoline's one aligned 8-byte load sees whole, old or new. A write through
 * /proc/PID/mem or ptrace is a kernel memcpy that gives no such guarantee to a running reader.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sie.h"
#include "target.h"

#define PAGE 4096ul

int sie_values_map(struct target *t, const struct sie_plan *p, struct sie_state *s,
		   char err[SIE_ERR_LEN])
{
	static const char name[] = "xsie-values";
	struct user_regs_struct r;
	uint64_t where;
	char path[64];
	long fd, addr;
	int lfd;
	void *local;

	if (target_live_index(t) < 0 || target_regs(t, target_live_index(t), &r))
		return -1;
	where = (r.rsp - 8192) & ~15ull; /* far below the red zone of the stopped thread */
	if (target_write(t, where, name, sizeof(name))) {
		snprintf(err, SIE_ERR_LEN, "pid %d: cannot write to its stack", t->pid);
		return -1;
	}
	fd = target_syscall(t, SYS_memfd_create, (long)where, MFD_CLOEXEC, 0, 0, 0, 0, err);
	if (fd < 0) {
		snprintf(err, SIE_ERR_LEN, "pid %d: memfd_create for the value words: %s", t->pid,
			 strerror((int)-fd));
		return -1;
	}
	addr = target_syscall(t, SYS_ftruncate, fd, (long)PAGE, 0, 0, 0, 0, err);
	snprintf(path, sizeof(path), "/proc/%d/fd/%ld", target_proc(t), fd);
	lfd = addr ? -1 : open(path, O_RDWR | O_CLOEXEC);
	local = lfd < 0 ? MAP_FAILED : mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
	if (lfd >= 0 && local == MAP_FAILED)
		close(lfd);
	addr = local == MAP_FAILED ? -ENOMEM
				   : target_syscall(t, SYS_mmap, (long)s->values_addr, (long)PAGE,
						    PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0, err);
	target_syscall(t, SYS_close, fd, 0, 0, 0, 0, 0, err);
	if (local == MAP_FAILED || addr != (long)s->values_addr) {
		snprintf(err, SIE_ERR_LEN, "pid %d: cannot share the value page at %#lx: %s",
			 t->pid, s->values_addr,
			 local == MAP_FAILED ? strerror(errno) : strerror((int)-addr));
		if (local != MAP_FAILED)
			munmap(local, PAGE);
		return -1;
	}
	s->values = local;
	s->values_fd = lfd;
	for (int k = 0; k < p->nconsts; k++)
		sie_values_store(s, k, p->consts[k].original);
	return 0;
}

void sie_values_store(const struct sie_state *s, int k, int64_t v)
{
	__atomic_store_n(&s->values[k], v, __ATOMIC_RELEASE);
}

void sie_values_unmap(struct sie_state *s)
{
	if (s->values) { /* values_fd is ours only while the page is mapped */
		munmap(s->values, PAGE);
		close(s->values_fd);
	}
	s->values = NULL;
	s->values_fd = -1;
}

int sie_values_share(int sock, const struct sie_state *s, char err[SIE_ERR_LEN])
{
	static char line[] = "values\n";
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = line, .iov_len = sizeof(line) - 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	if (!s->values || s->values_fd < 0) {
		snprintf(err, SIE_ERR_LEN, "no value page to share");
		return -1;
	}
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &s->values_fd, sizeof(int));
	if (sendmsg(sock, &m, MSG_NOSIGNAL) != (ssize_t)iov.iov_len) {
		snprintf(err, SIE_ERR_LEN, "sharing the value page: %s", strerror(errno));
		return -1;
	}
	return 0;
}
