// SPDX-License-Identifier: MIT
/*
 * xtune-bulk: the demo's workload, one bulk TCP transfer between two network namespaces.
 *
 * The listening socket is created inside --server-netns and the sending socket inside
 * --client-netns (a socket belongs to the namespace it was created in), so one process drives
 * both ends and the per-namespace tcp_rmem / tcp_wmem apply to their own side. The receiver calls
 * bulk_chunk() once per XT_CHUNK bytes: xobserve's func family uprobes it, which turns
 * throughput into an observer signal (func.bulk_chunk.rate, chunks per second).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define XT_CHUNK (64 * 1024)
#define XT_BUF	 (256 * 1024)

static volatile sig_atomic_t stopping;
static unsigned long long chunks;

/* One call per received chunk; noinline keeps a symbol for the uprobe. */
__attribute__((noinline)) void bulk_chunk(unsigned long long n)
{
	__asm__ volatile("" : : "r"(n) : "memory");
	chunks = n;
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static int enter_netns(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "xtune-bulk: cannot enter %s: %s\n", path, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

static void *receiver(void *arg)
{
	int lfd = *(int *)arg;
	static char buf[XT_BUF];
	unsigned long long total = 0, n = 0;

	while (!stopping) {
		int cfd = accept(lfd, NULL, NULL);
		ssize_t r;

		if (cfd < 0)
			continue;
		while ((r = recv(cfd, buf, sizeof(buf), 0)) > 0) {
			total += (unsigned long long)r;
			while (total >= XT_CHUNK) {
				total -= XT_CHUNK;
				bulk_chunk(++n);
			}
		}
		close(cfd);
	}
	return NULL;
}

static int sender(const struct sockaddr_in *addr, const char *cc, double conn_s)
{
	static char buf[1 << 20];
	struct timespec t0, t;

	memset(buf, 'x', sizeof(buf));
	while (!stopping) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -1;
		if (cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)) < 0) {
			fprintf(stderr, "xtune-bulk: congestion control %s: %s\n", cc,
				strerror(errno));
			close(fd);
			return -1;
		}
		if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
			close(fd);
			usleep(50000);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			if (send(fd, buf, sizeof(buf), MSG_NOSIGNAL) < 0)
				break;
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (!stopping &&
			 (conn_s <= 0 ||
			  (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < conn_s));
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *server_ns = NULL, *client_ns = NULL, *ip = NULL, *cc = "cubic";
	double conn_s = 0;
	int port = 5201, one = 1, lfd;
	struct sockaddr_in addr = {.sin_family = AF_INET};
	struct sigaction sa = {.sa_handler = on_signal};
	pthread_t rx;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--server-netns"))
			server_ns = argv[i + 1];
		else if (!strcmp(argv[i], "--client-netns"))
			client_ns = argv[i + 1];
		else if (!strcmp(argv[i], "--addr"))
			ip = argv[i + 1];
		else if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--cc"))
			cc = argv[i + 1];
		else if (!strcmp(argv[i], "--conn-seconds"))
			conn_s = atof(argv[i + 1]);
		else
			break;
	}
	if (!server_ns || !client_ns || !ip || inet_pton(AF_INET, ip, &addr.sin_addr) != 1) {
		fprintf(stderr,
			"usage: xtune-bulk --server-netns PATH --client-netns PATH --addr IPV4 "
			"[--port N] [--cc NAME] [--conn-seconds S]\n");
		return 2;
	}
	addr.sin_port = htons((unsigned short)port);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	if (enter_netns(server_ns) < 0)
		return 1;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(lfd, 4) < 0) {
		fprintf(stderr, "xtune-bulk: listen on %s:%d: %s\n", ip, port, strerror(errno));
		return 1;
	}
	if (pthread_create(&rx, NULL, receiver, &lfd))
		return 1;
	if (enter_netns(client_ns) < 0 || sender(&addr, cc, conn_s) < 0)
		return 1;
	shutdown(lfd, SHUT_RDWR);
	fprintf(stderr, "xtune-bulk: %llu chunks of %d bytes received\n", chunks, XT_CHUNK);
	return 0;
}
