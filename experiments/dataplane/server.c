// SPDX-License-Identifier: MIT
/*
 * A small UDP dataplane with the I/O design of the ML-native dataplane paper. Each polling round
 * takes up to the compiled-in RX_BATCH_SIZE requests from the socket (when nothing waits, it waits
 * at most RX_FILL_NS per slot for the batch to fill: interrupt coalescing) into per-flow RX buffers
 * (a flow is a client's source port), then delivers only the first payload of each flow's buffer to
 * the application, processes those and answers them with one sendmmsg. So the best RX_BATCH_SIZE
 * depends on the number of active flows: much larger than the flow count, the round pays for
 * taking requests it cannot deliver yet (RX_PKT_COST_NS each) and the flow buffers fill up
 * (FLOW_BUF payloads each; more are dropped); much smaller, more rounds (ROUND_COST_NS each: a
 * doorbell, a flush) are needed for the same requests; and under light load a large batch makes
 * its first request wait for the rest.
 *
 *   server PORT        answers on 127.0.0.1:PORT; a request "stats" returns
 *                      "batches packets max_batch" (rounds that took requests, payloads
 *                      delivered, most requests taken in one round)
 *
 * serve_batch() runs once per polling round, from the pickup of its first request to the reply:
 * an observer's uprobe on it sees the time a round's first request spends in the server (`xtune
 * demo`). dp_round(active_flows, backlog, oldest_age_us, taken) is called once per round with the
 * flows that have payloads waiting, how many, how long the oldest of those about to be delivered
 * has waited since the client sent it, and how many requests the round took from the socket: a
 * uprobe on it reads the dataplane's load signals. Summed over a window, `taken` is the arrival
 * rate whatever RX_BATCH_SIZE is (until the server falls behind), a load signal a policy can act on
 * without its own choice feeding back into it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#define RX_BATCH_SIZE  64
#define MAX_BATCH      1024 /* the largest RX_BATCH_SIZE the arrays hold */
#define RX_FILL_NS     100000
#define ROUND_COST_NS  100000
#define RX_PKT_COST_NS 1000
#define PKT_COST_NS    4000
#define PKT_LEN	       128
#define MAX_FLOWS      512 /* flows with payloads waiting at once; a request beyond is dropped */
#define FLOW_BUF       8   /* payloads a flow's RX buffer holds; a request beyond is dropped */

struct payload {
	struct sockaddr_in peer;
	unsigned int len;
	char data[PKT_LEN];
};

struct flow {
	uint16_t port; /* the client's source port */
	unsigned int head, count;
	struct payload buf[FLOW_BUF];
};

/* Requests as recvmmsg takes them, and the replies of one round. */
static struct mmsghdr msgs[MAX_BATCH], replies[MAX_FLOWS];
static struct iovec iovs[MAX_BATCH], reply_iovs[MAX_FLOWS];
static struct sockaddr_in peers[MAX_BATCH];
static char bufs[MAX_BATCH][PKT_LEN];

/* Flows with payloads waiting, in arrival order (delivered round-robin); slot_of_port: slot + 1. */
static struct flow flows[MAX_FLOWS];
static uint16_t slot_of_port[65536];
static int active[MAX_FLOWS], nactive, free_slots[MAX_FLOWS], nfree, waiting;
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
 * Collect one batch: at most RX_BATCH_SIZE requests, sleeping at most RX_FILL_NS per slot from the
 * first request for the batch to fill (interrupt coalescing: a timer, not a spinning CPU), but only
 * when no payload waits in the flow buffers (a polling dataplane with work to do does not wait).
 * The bound is read once per batch (the empty asm keeps the compiler from folding it into a second
 * immediate, bound × RX_FILL_NS) and only counted down by what arrived, so a bound retuned live
 * (SIE) reaches a batch whole: recvmmsg's count and the fill deadline come from one value.
 */
__attribute__((noinline)) static int rx_batch(int fd)
{
	long long first = 0;
	int bound = RX_BATCH_SIZE, n = 0, got, room;

	__asm__("" : "+r"(bound));
	room = bound;

	for (;;) {
		got = recvmmsg(fd, msgs + n, (unsigned int)room, MSG_DONTWAIT, NULL);
		if (got > 0) {
			if (!n)
				first = now_ns();
			n += got;
			room -= got;
			if (room <= 0)
				break;
		} else {
			/* Coalescing: sleep until the next request or the batch's deadline. */
			long long left = first + (long long)bound * RX_FILL_NS - now_ns();
			struct pollfd p = {.fd = fd, .events = POLLIN};
			struct timespec ts = {left / 1000000000, left % 1000000000};

			if (!n || waiting || left <= 0 || ppoll(&p, 1, &ts, NULL) <= 0)
				break;
		}
	}
	return n;
}

/* Put the n requests recvmmsg took into their flows' RX buffers (dropped when full). */
static void enqueue(int n)
{
	for (int i = 0; i < n; i++) {
		uint16_t port = ntohs(peers[i].sin_port);
		struct flow *f;
		struct payload *p;
		int slot = slot_of_port[port] - 1;

		spend(RX_PKT_COST_NS);
		if (slot < 0) {
			if (!nfree)
				continue;
			slot = free_slots[--nfree];
			slot_of_port[port] = (uint16_t)(slot + 1);
			flows[slot].port = port;
			active[nactive++] = slot;
		}
		f = &flows[slot];
		if (f->count == FLOW_BUF)
			continue; /* dropped: the client sees no answer */
		p = &f->buf[(f->head + f->count++) % FLOW_BUF];
		p->peer = peers[i];
		p->len = msgs[i].msg_len;
		memcpy(p->data, bufs[i], p->len);
		waiting++;
	}
	for (int i = 0; i < n; i++)
		reset_slot(i);
}

/* Deliver the first payload of every active flow to the application, answer them; n delivered. */
static int deliver(int fd)
{
	int n = 0, still = 0;

	for (int i = 0; i < nactive; i++) {
		struct flow *f = &flows[active[i]];
		struct payload *p = &f->buf[f->head];

		spend(PKT_COST_NS);
		if (p->len == 5 && !memcmp(p->data, "stats", 5))
			p->len = (unsigned int)snprintf(p->data, PKT_LEN, "%llu %llu %llu", batches,
							packets, max_batch);
		reply_iovs[n] = (struct iovec){p->data, p->len};
		replies[n].msg_hdr = (struct msghdr){.msg_name = &p->peer,
						     .msg_namelen = sizeof(p->peer),
						     .msg_iov = &reply_iovs[n],
						     .msg_iovlen = 1};
		n++;
	}
	packets += (unsigned long long)n;
	if (n)
		sendmmsg(fd, replies, (unsigned int)n, 0);
	/* Only now, after sendmmsg read the payloads: advance the flows, free the emptied ones. */
	for (int i = 0; i < nactive; i++) {
		struct flow *f = &flows[active[i]];

		f->head = (f->head + 1) % FLOW_BUF;
		if (--f->count) {
			active[still++] = active[i];
		} else {
			slot_of_port[f->port] = 0;
			free_slots[nfree++] = active[i];
		}
	}
	nactive = still;
	waiting -= n;
	return n;
}

/*
 * How long the oldest payload about to be delivered has waited, in µs: requests carry their send
 * time (the load generator's first 8 bytes, CLOCK_MONOTONIC on this host). This is the wait a
 * client sees before its reply, which serve_batch's own duration does not include (time in the
 * socket and in the flow buffers before the round).
 */
static int oldest_age_us(void)
{
	long long now = now_ns(), oldest = now;

	for (int i = 0; i < nactive; i++) {
		const struct flow *f = &flows[active[i]];
		const struct payload *p = &f->buf[f->head];
		long long sent;

		if (p->len < sizeof(sent))
			continue;
		memcpy(&sent, p->data, sizeof(sent));
		if (sent > 0 && sent < oldest)
			oldest = sent;
	}
	return (int)((now - oldest) / 1000);
}

/* A uprobe target: the load signals of one polling round. Never inlined nor dropped (noipa). */
__attribute__((noipa)) void dp_round(int active_flows, int backlog, int oldest_age_us, int taken)
{
	__asm__ volatile("" : : "r"(active_flows), "r"(backlog), "r"(oldest_age_us), "r"(taken));
}

/*
 * One polling round: take requests into the flow buffers, deliver one payload per flow, answer.
 * Global and noinline so that a uprobe can find it. Returns what is left to do: payloads
 * delivered plus those still waiting (0: the socket is drained and nothing waits).
 */
__attribute__((noinline)) int serve_batch(int fd)
{
	int n = rx_batch(fd), delivered;

	if (n > 0) {
		batches++;
		if ((unsigned long long)n > max_batch)
			max_batch = (unsigned long long)n;
		enqueue(n);
	}
	dp_round(nactive, waiting, nactive ? oldest_age_us() : 0, n);
	if (!nactive)
		return 0;
	spend(ROUND_COST_NS);
	delivered = deliver(fd);
	return delivered + waiting;
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
	for (int i = 0; i < MAX_FLOWS; i++)
		free_slots[nfree++] = MAX_FLOWS - 1 - i;
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
