// SPDX-License-Identifier: MIT
/*
 * The bridge's peers: each remote ZeroMQ connection (routing id) has its own unix connection to
 * xrtd, so each holds its own xrtd client and lease, exactly as a local tuner would.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bridge.h"

#define ID_MAX 256

struct peer {
	uint8_t id[ID_MAX];
	size_t id_len;
	bool used;
	int fd;	    /* to xrtd */
	int tcp_fd; /* libzmq's socket of the peer's connection */
};

static struct peer peers[BRIDGE_MAX_PEERS];
/*
 * Routing ids of peers whose TCP connection ended (ROUTER's own ids are never reused): a request
 * of theirs still queued behind the DISCONNECTED event must not open a new xrtd connection.
 */
static struct {
	uint8_t id[ID_MAX];
	size_t id_len;
} gone[BRIDGE_MAX_PEERS];
static unsigned gone_next;
static char *reply;
static size_t reply_cap;
static char error_reply[2 * 800 + 64]; /* fail()'s 800-byte text, every byte escaped at worst */

/* {"ok": false, "error": "<what>: <why>"} with the text's quotes and backslashes escaped. */
static const char *fail(const char *what, const char *why)
{
	char text[800], *o = error_reply;
	const char *p;

	snprintf(text, sizeof(text), "%s: %s", what, why);
	o += sprintf(o, "{\"ok\": false, \"error\": \"xrtd-bridge: ");
	for (p = text; *p; p++) {
		if (*p == '"' || *p == '\\')
			*o++ = '\\';
		*o++ = (*p == '\n' || *p == '\r') ? ' ' : *p;
	}
	strcpy(o, "\"}");
	return error_reply;
}

static void drop(struct peer *p)
{
	if (p->used)
		close(p->fd);
	p->used = false;
}

static int connect_xrtd(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	/* xrtd answers every request at once; a longer silence means it is stuck or gone. */
	struct timeval timeout = {.tv_sec = 10};
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) ||
	    connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

static struct peer *find(const uint8_t *id, size_t id_len, const char *xrtd_socket,
			 const char **err)
{
	struct peer *p, *free_slot = NULL;

	for (p = peers; p < peers + BRIDGE_MAX_PEERS; p++) {
		if (p->used && p->id_len == id_len && !memcmp(p->id, id, id_len))
			return p;
		if (!p->used && !free_slot)
			free_slot = p;
	}
	for (size_t i = 0; i < BRIDGE_MAX_PEERS; i++) {
		if (gone[i].id_len == id_len && !memcmp(gone[i].id, id, id_len)) {
			*err = fail("refused", "this client's connection has ended");
			return NULL;
		}
	}
	if (!free_slot || id_len > ID_MAX) {
		*err = fail("refused", "too many remote clients");
		return NULL;
	}
	free_slot->fd = connect_xrtd(xrtd_socket);
	if (free_slot->fd < 0) {
		*err = fail(xrtd_socket, strerror(errno));
		return NULL;
	}
	memcpy(free_slot->id, id, id_len);
	free_slot->id_len = id_len;
	free_slot->used = true;
	return free_slot;
}

static bool send_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len) {
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		buf += n;
		len -= n;
	}
	return true;
}

/* xrtd's one reply line; it sends nothing after it until the next request. */
static const char *read_reply(struct peer *p, const char *xrtd_socket)
{
	size_t len = 0;
	char *nl = NULL;
	ssize_t n;

	while (!nl) {
		if (reply_cap - len < 4096) {
			char *grown = realloc(reply, reply_cap + 65536);

			if (!grown)
				return fail(xrtd_socket, "out of memory for the reply");
			reply = grown;
			reply_cap += 65536;
		}
		n = recv(p->fd, reply + len, reply_cap - len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			drop(p);
			return fail(xrtd_socket,
				    n ? strerror(errno) : "xrtd closed the connection");
		}
		nl = memchr(reply + len, '\n', n);
		len += n;
	}
	*nl = 0;
	return reply;
}

const char *peer_forward(const char *xrtd_socket, const uint8_t *id, size_t id_len, int tcp_fd,
			 const char *line, size_t len)
{
	const char *err = NULL;
	struct peer *p;

	/* One request is one line: a newline inside would make xrtd answer twice. */
	if (!len || memchr(line, '\n', len) || memchr(line, 0, len))
		return fail("request", "not one line of JSON (empty, or a newline or NUL inside)");
	p = find(id, id_len, xrtd_socket, &err);
	if (!p)
		return err;
	p->tcp_fd = tcp_fd;
	if (!send_all(p->fd, line, len) || !send_all(p->fd, "\n", 1)) {
		drop(p);
		return fail(xrtd_socket, strerror(errno));
	}
	return read_reply(p, xrtd_socket);
}

void peers_close_tcp(int tcp_fd)
{
	struct peer *p;

	for (p = peers; p < peers + BRIDGE_MAX_PEERS; p++) {
		if (!p->used || p->tcp_fd != tcp_fd)
			continue;
		fprintf(stderr,
			"xrtd-bridge: a client's connection ended (closed, or silent past the "
			"heartbeat): its xrtd connection closed, its lease left to xrtd\n");
		memcpy(gone[gone_next].id, p->id, p->id_len);
		gone[gone_next].id_len = p->id_len;
		gone_next = (gone_next + 1) % BRIDGE_MAX_PEERS;
		drop(p);
	}
}

void peers_close_all(void)
{
	struct peer *p;

	for (p = peers; p < peers + BRIDGE_MAX_PEERS; p++)
		drop(p);
}
