// SPDX-License-Identifier: MIT
/* The control socket: line-delimited JSON requests, one reply line each (runtime/README.md). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.h"
#include "ops.h"

#define CLIENT_MAX     32
#define LINE_MAX_BYTES 65536

struct client {
	int fd;
	size_t len;
	char buf[LINE_MAX_BYTES];
	struct peer peer;
};

static int listen_fd = -1, signal_fd = -1;
static const char *socket_path;
static struct client *clients[CLIENT_MAX];

/* Answer one request line; false when the reply could not be sent (the client is dropped). */
static bool reply(struct client *c, const char *line, size_t len)
{
	char err[XRTD_ERR_LEN] = "";
	struct jbuf body = {0}, msg = {0};
	bool sent;
	int ret;

	xrtd_counters.requests++;
	ret = ops_dispatch(&c->peer, line, len, &body, err);
	if (ret) {
		xrtd_counters.request_errors++;
		jb_printf(&msg, "{\"ok\":false,\"error\":");
		jb_str(&msg, err[0] ? err : strerror(-ret));
		jb_printf(&msg, "}\n");
	} else {
		jb_printf(&msg, "{\"ok\":true%.*s}\n", (int)body.len, body.p ? body.p : "");
	}
	/* Never block on a client that does not read: the lease must be checked on time. */
	sent = send(c->fd, msg.p, msg.len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)msg.len;
	jb_free(&body);
	jb_free(&msg);
	return sent;
}

static void client_close(int i)
{
	/* A client that goes away mid-transaction leaves nothing half-applied: sets were queued. */
	close(clients[i]->fd);
	free(clients[i]);
	clients[i] = NULL;
}

/* Read what is there; answer every complete line. Returns false when the client is gone. */
static bool client_read(struct client *c)
{
	ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
	char *start = c->buf, *nl;

	if (n <= 0)
		return false;
	c->len += n;
	while ((nl = memchr(start, '\n', c->buf + c->len - start))) {
		char *end = nl;

		if (end > start && end[-1] == '\r')
			end--;
		*end = 0;
		if (!reply(c, start, end - start))
			return false;
		start = nl + 1;
	}
	c->len -= start - c->buf;
	memmove(c->buf, start, c->len);
	if (c->len == sizeof(c->buf)) {
		const char *msg =
			"{\"ok\":false,\"error\":\"request line longer than 65536 bytes\"}\n";

		send(c->fd, msg, strlen(msg), MSG_NOSIGNAL);
		return false;
	}
	return true;
}

int control_listen(const char *path, char err[XRTD_ERR_LEN])
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	sigset_t mask;
	mode_t old;

	if (strlen(path) >= sizeof(addr.sun_path))
		return xrtd_errf(err, ENAMETOOLONG, "--socket %s: path too long", path);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	socket_path = path;
	status_set_socket(path);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0)
		return xrtd_errf(err, errno, "socket: %s", strerror(errno));
	unlink(path);
	old = umask(0177); /* the socket is born 0600 */
	if (bind(listen_fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(listen_fd, 16)) {
		int e = errno;

		umask(old);
		return xrtd_errf(err, e, "--socket %s: %s", path, strerror(e));
	}
	umask(old);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (signal_fd < 0)
		return xrtd_errf(err, errno, "signalfd: %s", strerror(errno));
	return 0;
}

int control_run(void)
{
	struct pollfd pfd[CLIENT_MAX + 2];
	int idx[CLIENT_MAX + 2];

	for (;;) {
		int n = 0;

		pfd[n++] = (struct pollfd){.fd = signal_fd, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
		for (int i = 0; i < CLIENT_MAX; i++)
			if (clients[i]) {
				idx[n] = i;
				pfd[n++] = (struct pollfd){.fd = clients[i]->fd, .events = POLLIN};
			}
		/* 10 ms: the lease is checked at least this often. */
		if (poll(pfd, n, 10) < 0 && errno != EINTR)
			return -errno;
		apply_lock();
		lease_check();
		apply_unlock();
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(signal_fd, &si, sizeof(si)) == sizeof(si))
				fprintf(stderr, "xrtd: signal %u, restoring and exiting\n",
					si.ssi_signo);
			break;
		}
		if (pfd[1].revents & POLLIN) {
			int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC), slot = -1;

			for (int i = 0; i < CLIENT_MAX && slot < 0 && fd >= 0; i++)
				if (!clients[i])
					slot = i;
			if (fd >= 0 && slot < 0) {
				close(fd); /* full: the client sees EOF and may retry */
			} else if (fd >= 0) {
				clients[slot] = calloc(1, sizeof(struct client));
				if (!clients[slot])
					abort();
				clients[slot]->fd = fd;
			}
		}
		for (int p = 2; p < n; p++)
			if (pfd[p].revents && clients[idx[p]] && !client_read(clients[idx[p]]))
				client_close(idx[p]);
	}
	return 0;
}

void control_close(void)
{
	for (int i = 0; i < CLIENT_MAX; i++)
		if (clients[i])
			client_close(i);
	if (listen_fd >= 0) {
		close(listen_fd);
		unlink(socket_path);
	}
	if (signal_fd >= 0)
		close(signal_fd);
}
