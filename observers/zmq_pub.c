// SPDX-License-Identifier: MIT
/* ZeroMQ publisher: frames and the catalog as multipart [topic, bytes] messages, CURVE optional. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "observer.h"

static void *ctx, *sock;

/* Server side of CURVE: the ZAP handler first, so that no client is let in unchecked. */
static int set_curve(const char *dir)
{
	char secret[XT_Z85_KEY_LEN + 1];
	int one = 1;

	if (xt_key_read(dir, "server.key", true, secret) || xt_zap_start(ctx, dir))
		return -1;
	return zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) ||
	       zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, secret, XT_Z85_KEY_LEN) ||
	       zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "xtune", 5);
}

int xt_zmq_open(const char *endpoint, int hwm, const char *curve_dir)
{
	int one = 1, zero = 0;

	ctx = zmq_ctx_new();
	/* XPUB so that a new subscriber's subscription is seen and answered with the catalog. */
	sock = ctx ? zmq_socket(ctx, ZMQ_XPUB) : NULL;
	if (sock && curve_dir && set_curve(curve_dir)) {
		xt_zmq_close();
		return -1;
	}
	if (!sock || zmq_setsockopt(sock, ZMQ_XPUB_VERBOSE, &one, sizeof(one)) ||
	    zmq_setsockopt(sock, ZMQ_XPUB_NODROP, &one, sizeof(one)) ||
	    zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero)) || zmq_bind(sock, endpoint)) {
		fprintf(stderr, "xobserve: cannot publish on ZeroMQ endpoint %s: %s\n", endpoint,
			zmq_strerror(zmq_errno()));
		xt_zmq_close();
		return -1;
	}
	return 0;
}

/* Loopback: tcp:// to 127.0.0.0/8, ::1 or localhost, and ipc:// or inproc:// (never networked). */
bool xt_zmq_endpoint_is_loopback(const char *endpoint)
{
	char host[256];
	const char *colon;
	struct in6_addr a6;
	struct in_addr a4;
	size_t len;

	if (!strncmp(endpoint, "ipc://", 6) || !strncmp(endpoint, "inproc://", 9))
		return true;
	if (strncmp(endpoint, "tcp://", 6) || !(colon = strrchr(endpoint + 6, ':')))
		return false;
	len = colon - (endpoint + 6);
	if (len >= 2 && endpoint[6] == '[' && colon[-1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)len - 2, endpoint + 7);
	else
		snprintf(host, sizeof(host), "%.*s", (int)len, endpoint + 6);
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return !strcmp(host, "localhost");
}

/* NODROP + DONTWAIT: a subscriber at its high-water mark makes the send fail, and we count it. */
int xt_zmq_publish(const char *topic, const void *data, size_t len)
{
	if (!sock)
		return 0;
	if (zmq_send(sock, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		return -1;
	return zmq_send(sock, data, len, ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

bool xt_zmq_new_subscriber(void)
{
	char msg[64];
	bool seen = false;
	int n;

	while (sock && (n = zmq_recv(sock, msg, sizeof(msg), ZMQ_DONTWAIT)) > 0)
		seen |= msg[0] == 1;
	return seen;
}

void xt_zmq_close(void)
{
	if (sock)
		zmq_close(sock);
	if (ctx) {
		zmq_ctx_shutdown(ctx); /* ends the ZAP handler's wait */
		xt_zap_stop();
		zmq_ctx_term(ctx);
	}
	sock = ctx = NULL;
}
