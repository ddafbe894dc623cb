/* SPDX-License-Identifier: MIT */
/* xrtd-bridge: one xrtd control connection per remote ZeroMQ peer. */
#ifndef XRTD_BRIDGE_H
#define XRTD_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#define BRIDGE_MAX_PEERS 64
#define BRIDGE_MAX_LINE	 65536 /* a request line; a larger message is dropped by libzmq */

/*
 * Forward one request line of the peer with this ZeroMQ routing id to its xrtd connection (made
 * on its first request) and return xrtd's reply line (no newline), or an error reply of the
 * bridge's own; the reply stays valid until the next call. Never NULL.
 */
const char *peer_forward(const char *xrtd_socket, const uint8_t *id, size_t id_len, int tcp_fd,
			 const char *line, size_t len);
/* The peer's TCP connection (its fd in libzmq) is gone: close its xrtd connection. */
void peers_close_tcp(int tcp_fd);
void peers_close_all(void);
/* The keys dir, its server.key and authorized_clients: owned by root or the bridge's user and
 * writable by no one else; otherwise 0, with the file, its owner or mode and the fix on stderr. */
int keys_trusted(const char *dir);

#endif /* XRTD_BRIDGE_H */
