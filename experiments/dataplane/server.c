// SPDX-License-Identifier: MIT
/*
 * A small UDP dataplane in the style of the ML-native dataplane paper: one epoll loop, RX batching
 * bounded by the compiled-in RX_BATCH_SIZE. A batch is collected until it holds RX_BATCH_SIZE
 * requests or RX_FILL_NS passed since its first request (interrupt coalescing), then processed
 * and answered with one sendmmsg. Large batches amortize the per-batch cost (BATCH_COST_NS: a
 * doorbell, a flush); under light load they make the first request of a batch wait for the rest.
 *
 *   server PORT        answers on 127.0.0.1:PORT; a request "stats" returns
 *                      "batches packets max_batch"
 *
 * serve_batch() runs once per batch, from its first request's pickup to the reply: an observer's
 * uprobe on it sees the time a batch's first request spends in the server (`xtune demo`).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#define RX_BATCH_SIZE 64
#define MAX_BATCH     1024
#define RX_FILL_NS    4000
#define BATCH_COST_NS 20000
#define PKT_COST_NS   2000
#define PKT_LEN	      128

static struct mmsghdr msgs[MAX_BATCH];
static struct iovec iovs[MAX_BATCH];
static struct sockaddr_in peers[MAX_BATCH];
static char bufs[MAX_BATCH][PKT_LEN];
static unsigned long long batches, packets, max_batch;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void spend(long long ns)
{
	long long end = now_ns() + ns;

	while (now_ns() < end)
		;
}

/* Point slot i at its buffer and peer address again (recvmmsg and the reply overwrite them). */
static void reset_slot(int i)
{
	iovs[i] = (struct iovec){bufs[i], PKT_LEN};
	msgs[i].msg_hdr = (struct msghdr){.msg_name = &peers[i],
					  .msg_namelen = sizeof(peers[i]),
					  .msg_iov = &iovs[i],
					  .msg_iovlen = 1};
}

/*
 * Collect one batch: at most RX_BATCH_SIZE requests, waiting at most RX_FILL_NS per slot. The
 * bound is read once per batch and only counted down by what arrived (the slots are reset
 * outside), so a bound retuned live during a batch (SIE) cannot give recvmmsg a bad count.
 */
__attribute__((noinline)) static int rx_batch(int fd)
{
	long long first = 0;
	int n = 0, got, room = RX_BATCH_SIZE;

	for (;;) {
		got = recvmmsg(fd, msgs + n, (unsigned int)room, MSG_DONTWAIT, NULL);
		if (got > 0) {
			if (!n)
				first = now_ns();
			n += got;
			room -= got;
			if (room <= 0)
				break;
		} else if (!n || now_ns() - first >= (long long)RX_BATCH_SIZE * RX_FILL_NS) {
			break;
		}
	}
	return n;
}

static void process(int fd, int n)
{
	spend(BATCH_COST_NS);
	for (int i = 0; i < n; i++) {
		spend(PKT_COST_NS);
		iovs[i].iov_len = msgs[i].msg_len;
		if (msgs[i].msg_len == 5 && !memcmp(bufs[i], "stats", 5))
			iovs[i].iov_len = (size_t)snprintf(bufs[i], PKT_LEN, "%llu %llu %llu",
							   batches, packets, max_batch);
	}
	batches++;
	packets += (unsigned long long)n;
	if ((unsigned long long)n > max_batch)
		max_batch = (unsigned long long)n;
	sendmmsg(fd, msgs, (unsigned int)n, 0);
	for (int i = 0; i < n; i++)
		reset_slot(i);
}

/* One batch: collect, process, answer. Global and noinline so that a uprobe can find it. */
__attribute__((noinline)) int serve_batch(int fd)
{
	int n = rx_batch(fd);

	if (n > 0)
		process(fd, n);
	return n;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct epoll_event ev = {.events = EPOLLIN};
	int fd, ep, rcvbuf = 4 << 20;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PORT\n", argv[0]);
		return 2;
	}
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("bind");
		return 1;
	}
	for (int i = 0; i < MAX_BATCH; i++)
		reset_slot(i);
	ep = epoll_create1(0);
	ev.data.fd = fd;
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		if (epoll_wait(ep, &ev, 1, -1) <= 0)
			continue;
		while (serve_batch(fd) > 0)
			;
	}
}
