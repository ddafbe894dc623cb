// SPDX-License-Identifier: MIT
/*
 * xrtd-bridge: xrtd's control protocol over ZeroMQ (ROUTER) on TCP, CURVE only. Each request is
 * one message, the line xrtd would read on its socket; the reply is xrtd's line. Each remote
 * peer gets its own xrtd connection, hence its own client and lease: a peer that stops
 * heartbeating leaves its knobs to xrtd's lease expiry, whatever the bridge does. When the
 * peer's TCP connection ends (closed, or silent past the ZeroMQ heartbeat timeout), its xrtd
 * connection is closed too.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bridge.h"
#include "xtune/zmq_curve.h"

#define MONITOR "inproc://xrtd-bridge.monitor"

static const char usage[] =
	"usage: xrtd-bridge --xrtd-socket PATH --keys DIR [--endpoint tcp://ADDR:PORT]\n"
	"       xrtd-bridge --keygen DIR\n"
	"  --xrtd-socket PATH  the local xrtd's control socket\n"
	"  --keys DIR          CURVE keys: DIR/server.key and DIR/authorized_clients (client\n"
	"                      public keys); every other client is refused (no clear mode)\n"
	"  --endpoint EP       where to listen (default tcp://127.0.0.1:7207, loopback)\n"
	"  --keygen DIR        make the server and a client keypair in DIR (kept when there)\n";

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void die_usage(const char *what)
{
	fprintf(stderr, "xrtd-bridge: %s\n%s", what, usage);
	exit(2);
}

/* One request: [routing id, line]; anything else is answered with an error, never forwarded. */
static void serve_one(void *sock, const char *xrtd_socket)
{
	zmq_msg_t id, body;
	const char *out;
	int extra = 0;

	zmq_msg_init(&id);
	zmq_msg_init(&body);
	if (zmq_msg_recv(&id, sock, ZMQ_DONTWAIT) < 0)
		goto out;
	if (!zmq_msg_more(&id) || zmq_msg_recv(&body, sock, 0) < 0)
		goto out;
	while (zmq_msg_more(&body)) { /* a multipart request: drain it and refuse */
		zmq_msg_close(&body);
		zmq_msg_init(&body);
		if (zmq_msg_recv(&body, sock, 0) < 0)
			goto out;
		extra = 1;
	}
	if (extra)
		out = "{\"ok\": false, \"error\": \"xrtd-bridge: request: one frame expected\"}";
	else
		out = peer_forward(xrtd_socket, zmq_msg_data(&id), zmq_msg_size(&id),
				   zmq_msg_get(&body, ZMQ_SRCFD), zmq_msg_data(&body),
				   zmq_msg_size(&body));
	zmq_send(sock, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
	zmq_send(sock, out, strlen(out), 0);
out:
	zmq_msg_close(&id);
	zmq_msg_close(&body);
}

/* A monitor event: [u16 event, u32 value (the fd for DISCONNECTED)], [endpoint]. */
static void read_event(void *monitor)
{
	zmq_msg_t head, addr;
	uint16_t event;
	uint32_t fd;

	zmq_msg_init(&head);
	zmq_msg_init(&addr);
	if (zmq_msg_recv(&head, monitor, ZMQ_DONTWAIT) == 6 && zmq_msg_more(&head) &&
	    zmq_msg_recv(&addr, monitor, 0) >= 0) {
		memcpy(&event, zmq_msg_data(&head), 2);
		memcpy(&fd, (char *)zmq_msg_data(&head) + 2, 4);
		if (event == ZMQ_EVENT_DISCONNECTED)
			peers_close_tcp((int)fd);
	}
	zmq_msg_close(&head);
	zmq_msg_close(&addr);
}

static int setup(void *ctx, void *sock, void *monitor, const char *endpoint, const char *keys)
{
	int64_t max_msg = BRIDGE_MAX_LINE;
	/* Ping every second; a peer silent for 3 s is disconnected (its lease runs on in xrtd). */
	int zero = 0, ivl = 1000, timeout = 3000;

	return xt_curve_serve(ctx, sock, keys) ||
	       zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_msg, sizeof(max_msg)) ||
	       zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero)) ||
	       zmq_setsockopt(sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof(ivl)) ||
	       zmq_setsockopt(sock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof(timeout)) ||
	       zmq_socket_monitor(sock, MONITOR, ZMQ_EVENT_DISCONNECTED) ||
	       zmq_connect(monitor, MONITOR) || zmq_bind(sock, endpoint);
}

static int run(const char *endpoint, const char *keys, const char *xrtd_socket)
{
	void *ctx = zmq_ctx_new(), *sock = NULL, *monitor = NULL;
	int rc = 1;

	if (ctx) {
		sock = zmq_socket(ctx, ZMQ_ROUTER);
		monitor = zmq_socket(ctx, ZMQ_PAIR);
	}
	if (!sock || !monitor || setup(ctx, sock, monitor, endpoint, keys)) {
		fprintf(stderr, "xrtd-bridge: cannot serve on %s: %s\n", endpoint,
			zmq_strerror(zmq_errno()));
		goto out;
	}
	fprintf(stderr, "xrtd-bridge: serving %s on %s (CURVE; clients: %s/authorized_clients)\n",
		xrtd_socket, endpoint, keys);
	while (!stop) {
		zmq_pollitem_t items[] = {{.socket = monitor, .events = ZMQ_POLLIN},
					  {.socket = sock, .events = ZMQ_POLLIN}};
		int n = zmq_poll(items, 2, 1000);

		if (n < 0 && zmq_errno() != EINTR) {
			fprintf(stderr, "xrtd-bridge: poll: %s\n", zmq_strerror(zmq_errno()));
			goto out;
		}
		/* Disconnections first: a new peer may have been given the fd a gone one had. */
		if (n > 0 && (items[0].revents & ZMQ_POLLIN))
			read_event(monitor);
		else if (n > 0 && (items[1].revents & ZMQ_POLLIN))
			serve_one(sock, xrtd_socket);
	}
	rc = 0;
out:
	peers_close_all();
	if (monitor)
		zmq_close(monitor);
	if (sock)
		zmq_close(sock);
	if (ctx) {
		zmq_ctx_shutdown(ctx); /* ends the ZAP handler's wait */
		xt_zap_stop();
		zmq_ctx_term(ctx);
	}
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"xrtd-socket", required_argument, 0, 's'},
		{"keys", required_argument, 0, 'k'},
		{"endpoint", required_argument, 0, 'e'},
		{"keygen", required_argument, 0, 'g'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *xrtd_socket = NULL, *keys = NULL, *keygen = NULL;
	const char *endpoint = "tcp://127.0.0.1:7207";
	struct sigaction sa = {.sa_handler = on_signal};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			xrtd_socket = optarg;
			break;
		case 'k':
			keys = optarg;
			break;
		case 'e':
			endpoint = optarg;
			break;
		case 'g':
			keygen = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			die_usage("unknown option");
		}
	}
	if (optind < argc)
		die_usage("unexpected argument");
	if (keygen)
		return xt_keys_generate(keygen) ? 1 : 0;
	if (!xrtd_socket)
		die_usage("--xrtd-socket PATH is required");
	if (!keys)
		die_usage("--keys DIR is required: the bridge serves CURVE clients only");
	if (strncmp(endpoint, "tcp://", 6))
		die_usage("--endpoint: a tcp:// endpoint expected");
	if (!keys_trusted(keys) || xt_keys_check(keys))
		return 1;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return run(endpoint, keys, xrtd_socket);
}
