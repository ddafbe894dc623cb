// SPDX-License-Identifier: MIT
/* ZeroMQ publisher: frames and the catalog as multipart [topic, bytes] messages, CURVE optional. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "observer.h"

static void *ctx, *sock;

int xt_zmq_open(const char *endpoint, int hwm, const char *curve_dir)
{
	int one = 1, zero = 0;

	ctx = zmq_ctx_new();
	/* XPUB so that a new subscriber's subscription is seen and answered with the catalog. */
	sock = ctx ? zmq_socket(ctx, ZMQ_XPUB) : NULL;
	if (sock && curve_dir && xt_curve_serve(ctx, sock, curve_dir)) {
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
