// SPDX-License-Identifier: MIT
/* The server side of CURVE on a socket, and what counts as a loopback endpoint. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "xtune/zmq_curve.h"

int xt_curve_serve(void *ctx, void *sock, const char *dir)
{
	char secret[XT_Z85_KEY_LEN + 1];
	int one = 1;

	if (xt_key_read(dir, "server.key", true, secret) || xt_zap_start(ctx, dir))
		return -1;
	return zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) ||
	       zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, secret, XT_Z85_KEY_LEN) ||
	       zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "xtune", 5);
}

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
