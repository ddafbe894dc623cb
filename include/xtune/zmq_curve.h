/* SPDX-License-Identifier: MIT */
/*
 * CURVE keys and the ZAP handler of xtune's ZeroMQ servers (xobserve's publisher, xrtd-bridge),
 * built into each from lib/zmq_curve/. Key files are described in lib/zmq_curve/keys.c.
 */
#ifndef XTUNE_ZMQ_CURVE_H
#define XTUNE_ZMQ_CURVE_H

#include <stdbool.h>
#include <stdint.h>

#define XT_Z85_KEY_LEN	   40
#define XT_MAX_CLIENT_KEYS 256

int xt_key_read(const char *dir, const char *name, bool secret, char z85[XT_Z85_KEY_LEN + 1]);
int xt_keys_authorized(const char *dir, uint8_t (*keys)[32], int max); /* count, or -1 */
int xt_keys_check(const char *dir); /* server.key and authorized_clients, before serving */
int xt_keys_generate(const char *dir);
/* Before the server socket binds: without a handler libzmq lets every CURVE client in. */
int xt_zap_start(void *ctx, const char *dir);
void xt_zap_stop(void); /* after zmq_ctx_shutdown */
/* Server side of CURVE on sock: the ZAP handler first, then the secret key and the domain. */
int xt_curve_serve(void *ctx, void *sock, const char *dir);
/* tcp:// to 127.0.0.0/8, ::1 or localhost, and ipc:// or inproc:// (never networked). */
bool xt_zmq_endpoint_is_loopback(const char *endpoint);

#endif /* XTUNE_ZMQ_CURVE_H */
